// Usage, metrics and access logs per tenant (docs/GATEWAY.md "Logs, usage
// and metrics"), through a standalone gateway in front of a real node and
// through the embedded gate: after known traffic (one tenant's writes and
// reads, another's refused write, a request without a credential) the
// per-tenant counters moved by exactly the requests and refusals made and
// by at least the body bytes in and out; the usage log's JSON lines per
// tenant and bucket add up to the same, and the file is rotated to FILE.1
// past --usage-log-max-bytes with every line of both parsing; the access
// log line of a request names its tenant. GATEWAY.md does not name the
// usage line's members: tenant, bucket and requests are taken as written
// there, and bytes in/out and refusals as the members whose names start
// with bytes_in, bytes_out and refusals.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { sample } from "./checks.mjs";
import { MODES, bearer, call, seed, sleep, startDeployment, tempDir, tenant, tenantsDoc, waitFor } from "./lib.mjs";

const T = { full: tenant({ "*": "rwa" }), acme: tenant({ orders: "rw", notes: "rw" }), ro: tenant({ orders: "r" }) };
const MAX_BYTES = 4096; // the least --usage-log-max-bytes takes

// The usage lines of FILE and FILE.1, each parsed.
function usageLines(file) {
  const lines = [];
  for (const f of [`${file}.1`, file]) {
    let text = "";
    try { text = fs.readFileSync(f, "utf8"); } catch { continue; }
    for (const l of text.split("\n").filter(Boolean)) lines.push(JSON.parse(l));
  }
  return lines;
}

// A numeric member whose name starts with prefix (an object of counts is
// summed), 0 when none.
function member(line, prefix) {
  const k = Object.keys(line).find((x) => x.startsWith(prefix));
  const v = k === undefined ? 0 : line[k];
  return typeof v === "object" && v !== null ? Object.values(v).reduce((a, b) => a + Number(b), 0) : Number(v);
}

// A tenant's sums over its lines of bucket (any bucket when null).
function totals(lines, tenantName, bucket) {
  const mine = lines.filter((l) => l.tenant === tenantName && (bucket === null || l.bucket === bucket));
  const sum = (f) => mine.reduce((a, l) => a + f(l), 0);
  return { requests: sum((l) => Number(l.requests)), in: sum((l) => member(l, "bytes_in")), out: sum((l) => member(l, "bytes_out")), refusals: sum((l) => member(l, "refusals")) };
}

for (const mode of MODES) {
  describe(`usage, metrics and access logs (${mode})`, () => {
    let d;
    let usage;
    const metrics = async () => (await call(`${d.url}${d.metricsPath}`, { headers: bearer(T.full.key) })).text;
    before(async () => {
      usage = path.join(tempDir("runnel-gw-usage-"), "usage.jsonl");
      d = await startDeployment(mode, {
        tenants: tenantsDoc(T),
        gateArgs: ["--usage-log", usage, "--usage-log-interval-ms", "300", "--usage-log-max-bytes", String(MAX_BYTES)],
        accessLog: true,
      });
      await seed(d, T.full.key, [["/orders/u-1", ""], ["/notes/n-1", "note\n"]]);
    });
    after(async () => {
      await d?.stop();
    });

    let sent = 0;
    let read = 0;
    let m0;
    test("the per-tenant metrics count the traffic", async () => {
      m0 = await metrics();
      for (let i = 0; i < 3; i++) {
        const r = await call(`${d.url}/orders/u-1`, { method: "POST", headers: { ...bearer(T.acme.key), "content-type": "text/plain" }, body: "u".repeat(100) });
        assert.equal(r.status, 204, r.text);
        sent += 100;
      }
      for (let i = 0; i < 2; i++) {
        const r = await call(`${d.url}/orders/u-1?offset=-1`, { headers: bearer(T.acme.key) });
        assert.equal(r.status, 200, r.text);
        read += r.body.length;
      }
      assert.equal((await call(`${d.url}/orders/u-1`, { method: "POST", headers: { ...bearer(T.ro.key), "content-type": "text/plain" }, body: "x" })).status, 403);
      assert.equal((await call(`${d.url}/orders/u-1?offset=-1`)).status, 401);
      const m1 = await metrics();
      const delta = (name, labels) => sample(m1, name, labels) - sample(m0, name, labels);
      assert.equal(delta("runnel_gateway_requests_total", { tenant: "acme" }), 5, "acme's requests");
      const bin = delta("runnel_gateway_bytes_in_total", { tenant: "acme" });
      const bout = delta("runnel_gateway_bytes_out_total", { tenant: "acme" });
      assert.ok(bin >= sent && bin < sent + 20000, `acme's bytes in: ${bin} for ${sent} body bytes`);
      assert.ok(bout >= read && bout < read + 20000, `acme's bytes out: ${bout} for ${read} body bytes`);
      assert.equal(delta("runnel_gateway_refusals_total", { tenant: "ro", code: "FORBIDDEN" }), 1, "ro's refusal");
      assert.equal(delta("runnel_gateway_refusals_total", { tenant: "-", code: "INVALID_CREDENTIAL" }), 1, "a refusal of no tenant");
      assert.equal(delta("runnel_gateway_refusals_total", { tenant: "acme", code: "FORBIDDEN" }), 0, "acme was refused nothing");
    });

    test("the usage log adds up to the same, and is rotated", async () => {
      const t = await waitFor("usage lines for acme's 5 requests", () => {
        const x = totals(usageLines(usage), "acme", "orders");
        return x.requests >= 5 ? x : null;
      }, 5000);
      assert.equal(t.requests, 5, "acme's requests on orders");
      assert.ok(t.in >= sent && t.out >= read, `acme's bytes on orders: ${JSON.stringify(t)}`);
      // GATEWAY.md does not say which bucket a refusal is counted under
      await waitFor("ro's refusal in the usage log", () => totals(usageLines(usage), "ro", null).refusals === 1, 5000);
      for (let i = 0; i < 60 && !fs.existsSync(`${usage}.1`); i++) { // two lines per interval, past the rotation size
        for (const p of ["/orders/u-1", "/notes/n-1"]) await call(`${d.url}${p}?offset=-1`, { headers: bearer(T.acme.key) });
        await sleep(350);
      }
      assert.ok(fs.existsSync(`${usage}.1`), "the file was rotated to FILE.1");
      assert.ok(fs.statSync(usage).size <= MAX_BYTES + 1000, "the live file was rotated near its bound");
      usageLines(usage); // every line of both files parses
    });

    test("the access log line names the tenant", async () => {
      await sleep(200);
      const lines = d.gate.log.split("\n").filter((l) => / access: POST \/orders\/u-1 /.test(l) || /"path":"\/orders\/u-1"/.test(l));
      assert.ok(lines.length >= 3, `access lines of the POSTs: ${lines.length}`);
      assert.ok(lines.some((l) => /\bacme\b/.test(l)), `a line names acme: ${lines.slice(0, 4).join("\n")}`);
      assert.ok(lines.some((l) => /\bro\b/.test(l)), `a line names ro: ${lines.slice(0, 6).join("\n")}`);
    });
  });
}
