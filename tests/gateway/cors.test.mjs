// CORS behind the gate (docs/GATEWAY.md "CORS"), through a standalone
// gateway in front of a real node and through the embedded gate, the same
// table in both with identical answers: an origin the tenant lists is
// echoed in Access-Control-Allow-Origin with Vary: Origin (a read and a
// write); an origin nobody lists, one only another tenant lists, and no
// Origin at all get no Access-Control-Allow-Origin, never `*` (the node
// itself sends `*`); a preflight without credentials is allowed for an
// origin some tenant lists (the methods and the Authorization header
// allowed) and gets no Access-Control-Allow-Origin for one nobody lists.
import assert from "node:assert/strict";
import { assertFromNode } from "./checks.mjs";
import { modeTable } from "./table.mjs";
import { bearer, rawRequest, seed, startDeployment, tenant, tenantsDoc } from "./lib.mjs";

const APP = "https://app.example";
const OTHER = "https://other.example";
const T = {
  full: tenant({ "*": "rwa" }),
  web: tenant({ orders: "rw" }, { cors: [APP] }),
  other: tenant({ orders: "rw" }, { cors: [OTHER] }),
};

async function start(mode) {
  const d = await startDeployment(mode, { tenants: tenantsDoc(T) });
  await seed(d, T.full.key, [["/orders/o-1", "hello\n"]]);
  return { d };
}

const ask = (ctx, method, path, headers, body) => rawRequest(ctx.d.port, method, path, { headers, body });
const varyHasOrigin = (r) => r.headers.some(([k, v]) => k.toLowerCase() === "vary" && v.split(",").some((x) => x.trim().toLowerCase() === "origin"));
const acao = (r) => r.headers.filter(([k]) => k.toLowerCase() === "access-control-allow-origin").map(([, v]) => v);

function echoed(name, method, body) {
  return {
    name,
    run: async (ctx) => {
      const r = await ask(ctx, method, "/orders/o-1" + (method === "GET" ? "?offset=-1" : ""),
        { ...bearer(T.web.key), Origin: APP, ...(body ? { "Content-Type": "text/plain" } : {}) }, body);
      assertFromNode(r, method === "GET" ? 200 : 204, name);
      assert.deepEqual(acao(r), [APP], "the listed origin echoed, once");
      assert.ok(varyHasOrigin(r), `Vary: Origin: ${JSON.stringify(r.headers)}`);
      return r;
    },
  };
}

function none(name, key, origin) {
  return {
    name,
    run: async (ctx) => {
      const r = await ask(ctx, "GET", "/orders/o-1?offset=-1", { ...bearer(key), ...(origin ? { Origin: origin } : {}) });
      assertFromNode(r, 200, name);
      assert.deepEqual(acao(r), [], `no Access-Control-Allow-Origin: ${JSON.stringify(r.headers)}`);
      return r;
    },
  };
}

const cases = [
  echoed("a listed origin is echoed with Vary: Origin (GET)", "GET"),
  echoed("a listed origin is echoed with Vary: Origin (POST)", "POST", "cors\n"),
  none("an origin nobody lists gets none", T.web.key, "https://evil.example"),
  none("an origin only another tenant lists gets none", T.web.key, OTHER),
  none("no Origin gets none (no * behind the gate)", T.web.key, null),
  none("a tenant without a CORS list gets none", T.full.key, APP),
  {
    name: "a preflight without credentials for a listed origin",
    run: async (ctx) => {
      const r = await ask(ctx, "OPTIONS", "/orders/o-1", {
        Origin: APP, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type",
      });
      assert.ok(r.status >= 200 && r.status < 300, `a 2xx: ${r.statusLine} ${r.text}`);
      assert.deepEqual(acao(r), [APP], "the origin echoed");
      assert.match(r.header("access-control-allow-methods") ?? "", /\bPOST\b/, "POST allowed");
      assert.match(r.header("access-control-allow-headers") ?? "", /\bauthorization\b/i, "Authorization allowed");
      return r;
    },
  },
  {
    name: "a preflight for an origin nobody lists",
    run: async (ctx) => {
      const r = await ask(ctx, "OPTIONS", "/orders/o-1", { Origin: "https://evil.example", "Access-Control-Request-Method": "POST" });
      assert.deepEqual(acao(r), [], `no Access-Control-Allow-Origin: ${r.statusLine} ${JSON.stringify(r.headers)}`);
      return r;
    },
  },
];

modeTable("CORS", { start, cases });
