// Credentials never leak (docs/GATEWAY.md "Credentials", "Logs, usage and
// metrics"; extensions §11), through a standalone gateway in front of a real
// node and through the embedded gate, every process with --access-log and
// --log-level debug and the gate with a usage log: after traffic with every
// kind of credential (API keys valid, unknown and expired; HS256, ES256 and
// EdDSA JWTs valid, badly signed, expired and of an issuer whose JWKS URL
// is down; a JWT and a key sent as access_token on a GET, an SSE read and
// a refused POST), no key, token, token signature or issuer secret appears
// in any answer, in any process's log, in the gate's or the node's
// metrics, or in the usage log; and (standalone) the bytes the gateway
// sent to the node carry no Authorization header, no access_token and no
// credential at all.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { assertNoSecrets } from "./checks.mjs";
import {
  Issuer, MODES, bearer, call, deadUrl, newKey, openSse, seed, sleep, startDeployment, tempDir, tenant, tenantsDoc, waitFor,
} from "./lib.mjs";

const iss = new Issuer({ issuer: "https://id.test/", leeway: 0 });
const down = new Issuer({ issuer: "https://down.test/" });
const T = {
  full: tenant({ "*": "rwa" }),
  acme: tenant({ orders: "rw" }),
  old: tenant({ orders: "rw" }, {}, { expires: "2020-01-01T00:00:00Z" }),
};

for (const mode of MODES) {
  describe(`secrets (${mode})`, () => {
    let d;
    let usageLog;
    const answers = [];
    before(async () => {
      const issuers = [iss.entry(), down.entry({ keys: "jwks", jwksUrl: `${await deadUrl()}/jwks.json` })];
      usageLog = path.join(tempDir("runnel-gw-usage-"), "usage.jsonl");
      d = await startDeployment(mode, {
        tenants: tenantsDoc(T, { issuers }),
        gateArgs: ["--usage-log", usageLog, "--usage-log-interval-ms", "200"],
        accessLog: true,
        debug: true,
        tap: true,
      });
      await seed(d, T.full.key, [["/orders/o-1", "hello\n"]]);
    });
    after(async () => {
      await d?.stop();
    });

    // One request kept for the answers' check.
    async function send(p, { method = "GET", cred = null, body } = {}) {
      const headers = { ...(cred ? bearer(cred) : {}), ...(body !== undefined ? { "content-type": "text/plain" } : {}) };
      const r = await call(`${d.url}${p}`, { method, headers, body });
      answers.push(`${r.status} ${JSON.stringify(r.headers)}\n${r.text}`);
      return r;
    }

    test("traffic with every kind of credential", async () => {
      const creds = [
        T.acme.key, newKey(), T.old.key,
        iss.mint({ tenant: "acme" }), iss.mint({ tenant: "acme", alg: "ES256" }), iss.mint({ tenant: "acme", alg: "EdDSA" }),
        iss.mint({ tenant: "acme", otherKey: true }), iss.mint({ tenant: "acme", alg: "ES256", otherKey: true }),
        iss.mint({ tenant: "acme", ttl: -60 }), down.mint({ tenant: "acme", alg: "ES256" }),
      ];
      const statuses = [];
      for (const cred of creds) {
        statuses.push((await send("/orders/o-1?offset=-1", { cred })).status);
        statuses.push((await send("/orders/o-1", { method: "POST", cred, body: "s\n" })).status);
        statuses.push((await send("/orders/o-1", { method: "HEAD", cred })).status);
        statuses.push((await send("/secret/x?offset=-1", { cred })).status);
      }
      for (const q of [iss.mint({ tenant: "acme" }), T.acme.key]) {
        statuses.push((await send(`/orders/o-1?offset=-1&access_token=${q}`)).status);
        statuses.push((await send(`/orders/o-1?access_token=${q}`, { method: "POST", body: "q\n" })).status);
      }
      const sse = await openSse(`${d.url}/orders/o-1?offset=-1&live=sse&access_token=${iss.mint({ tenant: "acme", alg: "EdDSA" })}`);
      assert.equal(sse.status, 200, "an SSE read with access_token");
      await sse.waitFor((ev) => ev.some((e) => e.type === "control"), 5000);
      sse.close();
      for (const s of [200, 204, 401, 404, 503]) assert.ok(statuses.includes(s), `the traffic had a ${s}: ${statuses}`);
      await sleep(500); // log lines and a usage line written
    });

    test("no credential in any answer", () => {
      assert.ok(answers.length > 40);
      assertNoSecrets(answers.join("\n"), "the answers");
    });

    test("no credential in any log (with access lines and debug lines in it)", () => {
      const logs = d.logs();
      assert.match(logs, /access: GET \/orders\/o-1 /, "the access log is on");
      assert.match(logs, / debug /, "debug lines are on");
      assertNoSecrets(logs, `the ${mode} logs`);
      assert.doesNotMatch(logs, /access_token/, "the parameter is not logged");
    });

    test("no credential in the metrics", async () => {
      const gate = await call(`${d.url}${d.metricsPath}`, { headers: bearer(T.full.key) });
      assert.equal(gate.status, 200);
      assert.match(gate.text, /runnel_gateway_requests_total\{/);
      assertNoSecrets(gate.text, "the gate's metrics");
      const node = await call(`${d.node.url}/__runnel/metrics`, { headers: bearer(T.full.key) });
      assert.equal(node.status, 200);
      assertNoSecrets(node.text, "the node's metrics");
    });

    test("no credential in the usage log", async () => {
      const text = await waitFor("a usage line", () => {
        try {
          const t = fs.readFileSync(usageLog, "utf8");
          return t.includes("acme") ? t : null;
        } catch {
          return null;
        }
      }, 5000);
      assertNoSecrets(text, "the usage log");
    });

    if (mode === "standalone") {
      test("the node never saw a credential", () => {
        const wire = d.tap.sent().toString("latin1");
        assert.match(wire, /GET \/orders\/o-1/, "the tap saw the forwarded requests");
        assert.doesNotMatch(wire, /^authorization:/im, "no Authorization header forwarded");
        assert.doesNotMatch(wire, /access_token/, "no access_token forwarded");
        assertNoSecrets(wire, "the bytes sent to the node");
      });
    }
  });
}
