// The operator's routes under /__runnel/admin/ on a single node
// (docs/ADMIN.md): every route's answer and field names, read back against
// what the test made (buckets with stream counts and bytes, a bucket's
// streams with a prefix, one stream's full state with its producers, fork,
// snapshot, live readers and subscriptions, usage with its request
// counters, subscriptions with their state, the node's overview), pages
// and their cursors, and every refusal: the admin token (401 without it,
// 403 with a wrong one, on every route), a cursor of another listing or not
// the server's, limits, prefixes, bucket names, methods, missing buckets
// and streams. About 3 s.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Server, tempDir } from "./lib/server.mjs";
import { assertError, openSse, post, put, req } from "./lib/bucket.mjs";

const TOKEN = "admin-routes-token-0123456789";
const dir = tempDir("runnel-admin-token-");
const tokenFile = path.join(dir, "admin.token");
fs.writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
const server = new Server({ args: ["--admin-token-file", tokenFile] });
const AUTH = { authorization: `Bearer ${TOKEN}` };
const admin = (p, opts = {}) => req(`${server.url}/__runnel/admin/${p}`, { ...opts, headers: { ...AUTH, ...(opts.headers ?? {}) } });
async function json(p, status = 200) {
  const r = await admin(p);
  assert.equal(r.status, status, `${p} answered ${r.status} ${r.text}`);
  assert.equal(r.headers.get("content-type"), "application/json");
  assert.equal(r.headers.get("cache-control"), "no-store");
  return JSON.parse(r.text);
}

before(async () => {
  await server.start();
  const u = server.url;
  for (const [name, body] of [["a1", "xxxx"], ["a2", "yy"], ["b1", "z"]])
    assert.equal((await put(`${u}/alpha/${name}`, { body })).status, 201);
  assert.equal((await put(`${u}/beta/only`, { type: "application/json", body: "[1,2]" })).status, 201);
  // a producer, a snapshot, a fork
  const p = await post(`${u}/alpha/a1`, "!", { headers: { "producer-id": "ingest", "producer-epoch": "3", "producer-seq": "0" } });
  assert.equal(p.status, 200);
  const snap = await req(`${u}/alpha/a1/snapshot/${encodeURIComponent(p.headers.get("stream-next-offset"))}`,
    { method: "PUT", headers: { "content-type": "text/plain" }, body: "snap" });
  assert.equal(snap.status, 204, snap.text);
  const fork = await put(`${u}/v1/stream/beta/fork`, { type: null, headers: { "stream-forked-from": "/v1/stream/alpha/a2" } });
  assert.equal(fork.status, 201, fork.text);
});
after(async () => {
  const r = await server.stop();
  assert.equal(r?.code, 0, `graceful stop: ${JSON.stringify(r)}`);
  assert.ok(!/Sanitizer|runtime error/.test(server.log), `no sanitizer report:\n${server.logTail(40)}`);
});

describe("access", () => {
  const routes = ["node", "buckets", "buckets/alpha", "buckets/alpha/streams", "buckets/alpha/streams/a1",
    "usage", "subscriptions"];
  test("every route answers 401 INVALID_CREDENTIAL without the token and 403 FORBIDDEN with another", async () => {
    for (const r of [...routes, ["buckets/alpha/purge", "POST"]]) {
      const [p, method] = Array.isArray(r) ? r : [r, "GET"];
      const none = await req(`${server.url}/__runnel/admin/${p}`, { method });
      assertError(none, 401, "INVALID_CREDENTIAL", { what: p });
      assert.match(none.headers.get("www-authenticate") ?? "", /^Bearer/);
      assertError(await req(`${server.url}/__runnel/admin/${p}`, { method, headers: { authorization: "Bearer nope" } }),
        403, "FORBIDDEN", { what: p });
    }
    const b = await json("buckets/alpha"); // the refused purge changed nothing
    assert.equal(b.erased, false);
  });
});

describe("buckets", () => {
  test("the listing names every bucket with its streams and bytes", async () => {
    const all = await json("buckets");
    assert.deepEqual(all.buckets.map((b) => b.bucket), ["alpha", "beta"]);
    const [alpha, beta] = all.buckets;
    assert.equal(alpha.streams, 3);
    assert.deepEqual(alpha.bytes, { hot: 8, cold: 0, snapshots: 4, cold_snapshots: 0 }); // 5 + 2 + 1 bytes, a 4-byte snapshot
    assert.equal(beta.streams, 2);
    assert.equal(beta.bytes.hot, 4, "the fork's own bytes only: below its fork point they are alpha/a2's");
    assert.equal(alpha.erased, false);
    assert.equal(alpha.purge, null);
    assert.equal(all.next_cursor, null);
    assert.deepEqual(all.unreachable_groups, []);
    assert.deepEqual(all.unreachable_nodes, []);
  });

  test("pages of one with a cursor walk the listing in order", async () => {
    const first = await json("buckets?limit=1");
    assert.deepEqual(first.buckets.map((b) => b.bucket), ["alpha"]);
    assert.equal(typeof first.next_cursor, "string");
    const second = await json(`buckets?limit=1&cursor=${encodeURIComponent(first.next_cursor)}`);
    assert.deepEqual(second.buckets.map((b) => b.bucket), ["beta"]);
    assert.equal(second.next_cursor, null);
  });

  test("one bucket, and a bucket nothing created", async () => {
    const b = await json("buckets/alpha");
    assert.equal(b.bucket, "alpha");
    assert.equal(b.streams, 3);
    assertError(await admin("buckets/nothing-here"), 404, "BUCKET_NOT_FOUND");
  });
});

describe("streams", () => {
  test("a bucket's streams in name order, with a prefix", async () => {
    const all = await json("buckets/alpha/streams");
    assert.deepEqual(all.streams.map((s) => s.stream), ["a1", "a2", "b1"]);
    const a1 = all.streams[0];
    assert.equal(a1.path, "alpha/a1");
    assert.equal(a1.content_type, "text/plain");
    assert.equal(a1.bytes, 5);
    assert.equal(a1.has_snapshot, true);
    assert.equal(a1.producer_count, 1);
    assert.equal(a1.closed, false);
    assert.match(a1.tail, /^[0-9]{16}_[0-9]{16}$/);
    assert.match(a1.created_at, /^\d{4}-\d\d-\d\dT/);
    const a = await json("buckets/alpha/streams?prefix=a");
    assert.deepEqual(a.streams.map((s) => s.stream), ["a1", "a2"]);
    const none = await json("buckets/alpha/streams?prefix=zz");
    assert.deepEqual(none.streams, []);
    const page = await json("buckets/alpha/streams?prefix=a&limit=1");
    assert.deepEqual(page.streams.map((s) => s.stream), ["a1"]);
    const rest = await json(`buckets/alpha/streams?prefix=a&limit=1&cursor=${encodeURIComponent(page.next_cursor)}`);
    assert.deepEqual(rest.streams.map((s) => s.stream), ["a2"]);
    assert.equal(rest.next_cursor, null);
  });

  test("one stream's full state: producers, snapshot, fork, live readers, subscriptions", async () => {
    const sub = await req(`${server.url}/v1/stream/__ds/subscriptions/ops-view`, {
      method: "PUT", headers: { "content-type": "application/json" },
      body: JSON.stringify({ type: "pull-wake", streams: ["alpha/a1"], wake_stream: "beta/only" }) });
    assert.ok(sub.status === 201 || sub.status === 200, sub.text);
    const sse = await openSse(`${server.url}/alpha/a1?offset=now&live=sse`);
    try {
      const s = await json("buckets/alpha/streams/a1");
      assert.equal(s.path, "alpha/a1");
      assert.match(s.id, /^[0-9a-f]{16}$/);
      assert.match(s.incarnation, /^[1-9][0-9]{15}$/);
      assert.equal(s.group, null, "a single node has no groups");
      assert.equal(s.bytes_by_tier.hot, 5);
      assert.equal(s.appends, 2);
      assert.equal(s.live_readers, 1);
      assert.deepEqual(s.producers.map((p) => [p.id, p.epoch, p.last_seq, p.epoch_open]), [["ingest", 3, 0, true]]);
      assert.match(s.producers[0].last_write_at, /^\d{4}-/);
      assert.equal(s.snapshot.size, 4);
      assert.equal(s.snapshot.tier, "local");
      assert.equal(s.snapshot.offset, s.tail);
      assert.equal(s.fork_of, null);
      assert.equal(s.forks, 0);
      assert.deepEqual(s.subscriptions.map((x) => [x.id, x.type, x.link_type]), [["ops-view", "pull-wake", "explicit"]]);
      const src = await json("buckets/alpha/streams/a2");
      assert.equal(src.forks, 1);
      const f = await json("buckets/beta/streams/fork");
      assert.equal(f.fork_of.path, "alpha/a2");
      assert.equal(f.forked, true);
    } finally {
      sse.close();
    }
    assertError(await admin("buckets/alpha/streams/missing"), 404, "STREAM_NOT_FOUND");
    assertError(await admin("buckets/gamma/streams/missing"), 404, "BUCKET_NOT_FOUND");
  });
});

describe("usage and the other listings", () => {
  test("usage per bucket: bytes, staged parts, requests and bytes in and out since start", async () => {
    const before = await json("usage");
    assert.equal(before.usage_version, 1);
    assert.equal(before.counters.length, 1);
    assert.match(before.counters[0].instance, /^[0-9a-f]{16}$/);
    const b0 = before.buckets.find((b) => b.bucket === "beta");
    assert.deepEqual(b0.staged_parts.map((p) => [p.group, p.term]), [[0, 0]]);
    const r = await req(`${server.url}/beta/only?offset=-1`);
    assert.equal(r.status, 200);
    assert.equal((await post(`${server.url}/beta/only`, "[3]", { type: "application/json" })).status, 204);
    const after = await json("usage");
    const b1 = after.buckets.find((b) => b.bucket === "beta");
    assert.equal(b1.requests.reads, b0.requests.reads + 1);
    assert.equal(b1.requests.writes, b0.requests.writes + 1);
    assert.equal(b1.bytes_in, b0.bytes_in + 3);
    assert.equal(b1.bytes_out, b0.bytes_out + r.body.length);
    assert.equal(after.counters[0].instance, before.counters[0].instance);
  });

  test("subscriptions with their state", async () => {
    const all = await json("subscriptions");
    const s = all.subscriptions.find((x) => x.id === "ops-view");
    assert.ok(s, JSON.stringify(all));
    assert.equal(s.type, "pull-wake");
    assert.equal(s.links, 1);
    assert.equal(typeof s.pending_links, "number");
    assert.ok(["idle", "pending", "announced", "claimed"].includes(s.wake), s.wake);
    assert.equal(s.node, null);
  });

  test("the node's overview", async () => {
    const n = await json("node");
    assert.equal(n.ready, true);
    assert.equal(n.node, null);
    assert.equal(n.streams, 5);
    assert.equal(n.buckets, 2);
    assert.match(n.version, /^\d+\.\d+\.\d+/);
    assert.ok(n.uptime_ms >= 0);
    assert.equal(n.cluster_id, (await req(`${server.url}/__runnel/livez`)).headers.get("ursula-cluster-id"));
  });
});

describe("refusals", () => {
  test("cursors, limits, prefixes, names, methods, routes", async () => {
    const page = await json("buckets?limit=1");
    assertError(await admin(`buckets/alpha/streams?cursor=${encodeURIComponent(page.next_cursor)}`), 400, "INVALID_QUERY",
      { what: "a buckets cursor given to a streams listing" });
    assertError(await admin("buckets?cursor=not-a-cursor"), 400, "INVALID_QUERY");
    assertError(await admin("buckets?cursor=YWJj"), 400, "INVALID_QUERY", { what: "base64url but not ours" });
    for (const l of ["0", "1001", "01", "-1", "x"]) assertError(await admin(`buckets?limit=${l}`), 400, "INVALID_QUERY", { what: l });
    assertError(await admin("buckets?limit=1&limit=2"), 400, "INVALID_QUERY");
    assertError(await admin("buckets/alpha/streams?prefix=%FF"), 400, "INVALID_QUERY");
    assertError(await admin("buckets/__x"), 400, "INVALID_BUCKET_ID");
    assertError(await admin("buckets/a%2Fb"), 400, "INVALID_BUCKET_ID");
    assertError(await admin("buckets/alpha/streams/%FF"), 400, "INVALID_STREAM_ID");
    const m = await admin("buckets", { method: "POST" });
    assertError(m, 405, "METHOD_NOT_ALLOWED");
    assert.equal(m.headers.get("allow"), "GET, HEAD, OPTIONS");
    const g = await admin("buckets/alpha/purge");
    assertError(g, 405, "METHOD_NOT_ALLOWED");
    assert.equal(g.headers.get("allow"), "POST, OPTIONS");
    assertError(await admin("nothing"), 404, "NOT_FOUND");
    assertError(await admin("buckets/alpha/other"), 404, "NOT_FOUND");
  });
});
