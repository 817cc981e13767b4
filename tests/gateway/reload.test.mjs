// Keys and the tenants file's reload (docs/GATEWAY.md "`runnel gateway key
// new`", "The tenants file"), through a standalone gateway in front of a
// real node and through the embedded gate: `key new` adds a tenant and a
// key to the file (its SHA-256 only, the other tenants kept) and prints the
// key, which is refused until SIGHUP and works after it, with the rights
// given (rw and r); a keep-alive connection and a running SSE read opened
// before the reload are not dropped; a file that does not parse, or has an
// unknown member, keeps the old one and the log says so; a key given an
// expiry stops at it (CREDENTIAL_EXPIRED); a key removed stops at the next
// reload while a read it began goes on (requests in flight keep the file
// they started with); a file without tenants, an empty file and a missing
// one let nobody in, until a reload brings a tenant; and a file with an
// unknown member at the start is refused.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import { assertFromNode, assertOwn } from "./checks.mjs";
import {
  Conn, Deployment, Gateway, MODES, bearer, expectNoStart, keyNew, openSse, rawRequest, remember, requestHead, seed, sha256hex,
  sleep, startDeployment, tenant, tenantsDoc,
} from "./lib.mjs";

const T = { full: tenant({ "*": "rwa" }), old: tenant({ orders: "rw" }) };
const rfc3339 = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

// Runs `key new` and returns the printed key (remembered as a secret).
async function makeKey(file, name, buckets, extra = []) {
  const r = await keyNew(["--tenant", name, "--buckets", buckets, "--tenants", file, ...extra]);
  assert.equal(r.code, 0, `key new: ${r.stderr}`);
  const m = /^(rnk_[0-9a-f]{64})\n?$/.exec(r.stdout);
  assert.ok(m, `key new prints the key alone, rnk_ and 64 hex digits: ${JSON.stringify(r.stdout)}`);
  return remember(m[1]);
}

const get = (d, key, p = "/orders/o-1?offset=-1") => rawRequest(d.port, "GET", p, { headers: bearer(key) });
const post = (d, key, p, body) => rawRequest(d.port, "POST", p, { headers: { ...bearer(key), "Content-Type": "text/plain" }, body });

// Polls until a request with key answers `status` (after a SIGHUP), for
// ms at most.
async function until(d, key, status, what, ms = 5000) {
  let r;
  for (let i = 0; i < ms / 100; i++) {
    r = await get(d, key);
    if (r.status === status) return r;
    await sleep(100);
  }
  assert.fail(`${what}: still ${r.status} ${r.text} after ${ms} ms`);
}

for (const mode of MODES) {
  describe(`key new and SIGHUP (${mode})`, () => {
    let d;
    let fresh;
    let conn;
    let sse;
    before(async () => {
      d = await startDeployment(mode, { tenants: tenantsDoc(T) });
      await seed(d, T.full.key, [["/orders/o-1", "hello\n"], ["/audit/a-1", "audit\n"]]);
    });
    after(async () => {
      conn?.close();
      sse?.close();
      await d?.stop();
    });

    test("key new writes the key's hash only and prints the key", async () => {
      const before = JSON.parse(fs.readFileSync(d.tenantsFile, "utf8"));
      fresh = await makeKey(d.tenantsFile, "fresh", "orders:rw,audit:r");
      const text = fs.readFileSync(d.tenantsFile, "utf8");
      assert.ok(!text.includes(fresh), "the file does not hold the key");
      const doc = JSON.parse(text);
      assert.deepEqual(doc.tenants.fresh.rights, { orders: "rw", audit: "r" });
      assert.deepEqual(doc.tenants.fresh.keys.map((k) => k.sha256), [sha256hex(fresh)], "the file holds the key's SHA-256");
      assert.deepEqual(doc.tenants.old, before.tenants.old, "the other tenants are kept");
      assertOwn(await get(d, fresh), 401, "INVALID_CREDENTIAL", { what: "the new key before SIGHUP" });
    });

    test("after SIGHUP the new key works, with its rights", async () => {
      conn = await Conn.open(d.port);
      conn.write(requestHead("GET", "/orders/o-1?offset=-1", bearer(T.old.key)));
      assertFromNode(await conn.answer(), 200, "a request on the kept-alive connection");
      sse = await openSse(`${d.url}/orders/o-1?offset=now&live=sse`, { headers: bearer(T.old.key), timeoutMs: 30000 });
      assert.equal(sse.status, 200);
      d.reload();
      await until(d, fresh, 200, "the new key");
      assertFromNode(await post(d, fresh, "/orders/o-1", "by-fresh\n"), 204, "a write with rw");
      assertFromNode(await get(d, fresh, "/audit/a-1?offset=-1"), 200, "a read with r");
      assertOwn(await post(d, fresh, "/audit/a-1", "no\n"), 403, "FORBIDDEN", { what: "a write with r" });
    });

    test("the keep-alive connection and the SSE read were not dropped", async () => {
      assert.ok(!conn.ended, "the kept-alive connection is open");
      conn.write(requestHead("GET", "/orders/o-1?offset=-1", bearer(T.old.key)));
      assertFromNode(await conn.answer(), 200, "a second request on the kept-alive connection");
      assert.ok(!sse.ended, "the SSE read runs");
      assertFromNode(await post(d, T.full.key, "/orders/o-1", "after-reload\n"), 204, "an append");
      assert.ok(await sse.waitFor((ev) => ev.some((e) => e.data.includes("after-reload")), 5000), "the SSE read gets data appended after the reload");
    });

    test("a file that does not parse keeps the old one, and the log says why", async () => {
      const logBefore = d.gate.log.length;
      fs.writeFileSync(d.tenantsFile, '{"tenants": {');
      d.reload();
      await sleep(1000);
      assertFromNode(await get(d, fresh), 200, "the key of the old file");
      assert.ok(d.gate.log.length > logBefore, "the log grew");
      assert.match(d.gate.log.slice(logBefore), /tenant/i, "the log line names the tenants file");
    });

    test("a file with an unknown member keeps the old one", async () => {
      const doc = tenantsDoc({ old: T.old, full: T.full });
      doc.tenants.old.limts = { requests_per_second: 1 };
      d.setTenants(doc);
      d.reload();
      await sleep(1000);
      assertFromNode(await get(d, fresh), 200, "the key of the old file (the new one would drop it)");
    });

    test("a key with an expiry stops at it; a removed key stops at the reload, its read in flight goes on", async () => {
      const inFlight = await openSse(`${d.url}/orders/o-1?offset=now&live=sse`, { headers: bearer(fresh), timeoutMs: 30000 });
      assert.equal(inFlight.status, 200);
      try {
        d.setTenants(tenantsDoc(T)); // without the tenant fresh
        const brief = await makeKey(d.tenantsFile, "brief", "orders:r", ["--expires", rfc3339(Date.now() + 6000)]);
        d.reload();
        await until(d, brief, 200, "the key with an expiry");
        assertOwn(await until(d, fresh, 401, "the removed key"), 401, "INVALID_CREDENTIAL", { what: "a key no longer in the file" });
        assertFromNode(await post(d, T.full.key, "/orders/o-1", "in-flight\n"), 204, "an append");
        assert.ok(await inFlight.waitFor((ev) => ev.some((e) => e.data.includes("in-flight")), 5000),
          "a read in flight keeps the file it started with");
        const r = await until(d, brief, 401, "the expired key", 10000);
        assertOwn(r, 401, "CREDENTIAL_EXPIRED", { what: "a key past its expiry" });
      } finally {
        inFlight.close();
      }
    });
  });

  describe(`no tenants (${mode})`, () => {
    for (const [what, text] of [["a file without tenants", '{"tenants": {}}'], ["an empty file", ""]]) {
      test(`${what} lets nobody in until a reload brings a tenant`, async () => {
        const d = await new Deployment(mode, { tenants: text }).start();
        try {
          assertOwn(await get(d, T.full.key), 401, "INVALID_CREDENTIAL", { what });
          d.setTenants(tenantsDoc(T));
          d.reload();
          const r = await until(d, T.full.key, 404, "a tenant of the reloaded file (the stream does not exist)");
          assertFromNode(r, 404, "the node's 404 for a tenant of the reloaded file");
        } finally {
          await d.stop();
        }
      });
    }

    test("a missing file lets nobody in", async () => {
      const d = new Deployment(mode, { tenants: tenantsDoc(T) });
      fs.rmSync(d.tenantsFile);
      await d.start();
      try {
        assertOwn(await get(d, T.full.key), 401, "INVALID_CREDENTIAL", { what: "a missing file" });
      } finally {
        await d.stop();
      }
    });

    test("a file with an unknown member is refused at the start", async () => {
      const doc = tenantsDoc(T);
      doc.tenants.old.limts = {};
      const d = new Deployment(mode, { tenants: doc });
      if (mode === "standalone") {
        await d.node.start();
        const gw = new Gateway({ upstreams: [d.node.url], tenantsFile: d.tenantsFile });
        const r = await expectNoStart(gw);
        await d.node.stop();
        assert.notEqual(r.code, 0, r.log);
      } else {
        const r = await expectNoStart(d.node);
        assert.notEqual(r.code, 0, r.log);
      }
    });
  });
}
