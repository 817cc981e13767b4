// The external authorizer (docs/GATEWAY.md "An external authorizer"),
// through a standalone gateway in front of a real node and through the
// embedded gate, the same table in both with identical answers: what the
// gate asks (POST with tenant, method, path, bucket and stream, no
// credential), 204 allows, 402 answers PAYMENT_REQUIRED, 403 answers
// ACCOUNT_REVOKED when its body says so and FORBIDDEN otherwise, 429
// answers RATE_LIMITED with the authorizer's Retry-After, and a 500, an
// answer later than timeout_ms or an authorizer that is down answer 503
// AUTHORIZATION_UNAVAILABLE with Retry-After; a refused write applies
// nothing; a decision is cached for cache_ms.
import assert from "node:assert/strict";
import { assertFromNode, assertNoSecrets, assertOwn } from "./checks.mjs";
import { modeTable } from "./table.mjs";
import { authorizerStub, bearer, content, rawRequest, seed, sleep, startDeployment, tenant, tenantsDoc } from "./lib.mjs";

const NAMES = ["az-ok", "az-pay", "az-rev", "az-forbid", "az-rate", "az-bad", "az-slow", "az-gone"];
const T = Object.fromEntries(NAMES.map((n) => [n, tenant({ orders: "rw" })]));
const CACHE_MS = 1000;
const TIMEOUT_MS = 300;

// The authorizer's decisions, by tenant.
function decide(ask) {
  switch (ask?.tenant) {
    case "az-pay": return { status: 402 };
    case "az-rev": return { status: 403, headers: { "content-type": "application/json" }, body: { error: { code: "ACCOUNT_REVOKED", message: "closed" } } };
    case "az-forbid": return { status: 403, headers: { "content-type": "application/json" }, body: { error: { code: "FORBIDDEN", message: "no" } } };
    case "az-rate": return { status: 429, headers: { "retry-after": "7" } };
    case "az-bad": return { status: 500, body: "oops" };
    case "az-slow": return { status: 204, delayMs: TIMEOUT_MS * 5 };
    default: return { status: 204 };
  }
}

async function start(mode) {
  const stub = await authorizerStub(decide);
  const authorizer = { url: `${stub.url}/authorize`, timeout_ms: TIMEOUT_MS, cache_ms: CACHE_MS };
  const d = await startDeployment(mode, { tenants: tenantsDoc(T, { authorizer }) });
  await seed(d, T["az-ok"].key, [["/orders/o-1", "hello\n"]]);
  return { d, stub };
}

const ask = (ctx, name, method = "GET", path = "/orders/o-1", body) =>
  rawRequest(ctx.d.port, method, path, { headers: { ...bearer(T[name].key), ...(body ? { "Content-Type": "text/plain" } : {}) }, body });
const asked = (ctx, tenantName) => ctx.stub.requests.filter((r) => r.body.includes(`"${tenantName}"`));

// A refusal relayed from the authorizer, for a read and for a write (the
// write applies nothing).
function relayed(name, tenantName, status, code, opts = {}) {
  return {
    name,
    run: async (ctx) => {
      const r = await ask(ctx, tenantName, "GET", "/orders/o-1?offset=-1");
      assertOwn(r, status, code, { what: name, ...opts });
      const before = await content(ctx.d, T["az-ok"].key, "/orders/o-1");
      const w = await ask(ctx, tenantName, "POST", "/orders/o-1", `by-${tenantName}\n`);
      assertOwn(w, status, code, { what: `${name} (a write)`, ...opts });
      assert.equal(await content(ctx.d, T["az-ok"].key, "/orders/o-1"), before, "the refused write applied nothing");
      return r;
    },
  };
}

const cases = [
  {
    name: "an allowed request is asked about, without its credential",
    run: async (ctx) => {
      const r = await ask(ctx, "az-ok", "POST", "/orders/o-1", "allowed\n");
      assertFromNode(r, 204, "an allowed write");
      const q = asked(ctx, "az-ok").map((x) => ({ ...x, json: JSON.parse(x.body) }));
      const w = q.find((x) => x.json.method === "POST");
      assert.ok(w, `the authorizer was asked about the POST: ${JSON.stringify(q.map((x) => x.body))}`);
      assert.equal(w.method, "POST", "the authorizer is asked with a POST");
      assert.deepEqual({ tenant: w.json.tenant, method: w.json.method, path: w.json.path, bucket: w.json.bucket, stream: w.json.stream },
        { tenant: "az-ok", method: "POST", path: "/orders/o-1", bucket: "orders", stream: "o-1" });
      for (const x of ctx.stub.requests) assertNoSecrets(`${JSON.stringify(x.headers)}\n${x.body}`, "a request to the authorizer");
      return null;
    },
  },
  {
    name: "a decision is cached for cache_ms",
    run: async (ctx) => {
      await sleep(CACHE_MS + 200);
      const n0 = asked(ctx, "az-ok").length;
      for (let i = 0; i < 3; i++) assertFromNode(await ask(ctx, "az-ok", "GET", "/orders/o-1?offset=-1"), 200, "an allowed read");
      assert.equal(asked(ctx, "az-ok").length - n0, 1, "three reads within cache_ms ask once");
      return null;
    },
  },
  relayed("402 from the authorizer: PAYMENT_REQUIRED", "az-pay", 402, "PAYMENT_REQUIRED"),
  relayed("403 ACCOUNT_REVOKED from the authorizer", "az-rev", 403, "ACCOUNT_REVOKED"),
  relayed("403 from the authorizer: FORBIDDEN", "az-forbid", 403, "FORBIDDEN"),
  {
    name: "429 from the authorizer: RATE_LIMITED with its Retry-After",
    run: async (ctx) => {
      const r = await ask(ctx, "az-rate", "GET", "/orders/o-1?offset=-1");
      assertOwn(r, 429, "RATE_LIMITED", { what: "the authorizer's 429" });
      assert.equal(r.header("retry-after"), "7", "the authorizer's Retry-After");
      return r;
    },
  },
  relayed("a 500 from the authorizer: AUTHORIZATION_UNAVAILABLE", "az-bad", 503, "AUTHORIZATION_UNAVAILABLE"),
  relayed("no answer within timeout_ms: AUTHORIZATION_UNAVAILABLE", "az-slow", 503, "AUTHORIZATION_UNAVAILABLE"),
  {
    name: "the authorizer down: AUTHORIZATION_UNAVAILABLE",
    run: async (ctx) => {
      assertFromNode(await ask(ctx, "az-gone", "GET", "/orders/o-1?offset=-1"), 200, "allowed while the authorizer answers");
      await ctx.stub.close();
      await sleep(CACHE_MS + 200); // the cached decision lapsed
      const r = await ask(ctx, "az-gone", "GET", "/orders/o-1?offset=-1");
      assertOwn(r, 503, "AUTHORIZATION_UNAVAILABLE", { what: "the authorizer down" });
      return r;
    },
  },
];

modeTable("the external authorizer", {
  start,
  stop: async (ctx) => {
    await ctx.stub.close();
    await ctx.d.stop();
  },
  cases,
});
