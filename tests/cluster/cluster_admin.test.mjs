// Cluster mode, black-box: the operator's plane over a 3-node cluster of 4
// groups (docs/ADMIN.md "Clusters"). Every node answers for the whole
// cluster: bucket counts, pages of a bucket's streams merged from the
// groups' leaders in key order (pages of 7 across 4 groups), one stream's
// state from its leader with the live readers of every node, usage with
// every node's counters; a peer's ask (scope=local) refused without the
// cluster key's signature. The bucket purge from a follower: recorded in
// every group's log, every stream gone, creates refused 404 BUCKET_ERASED
// through every node (following redirects) and reads on every node, also
// after the leader of a group is SIGKILLed and on that node once it
// restarted (the groups snapshot every 4 entries, so the restarted node
// finds the fence in its groups' manifests), and in a backup of the cluster
// taken afterwards and restored into a single node. Last, two nodes down:
// the remaining node names the groups and nodes it could not reach instead
// of answering for them. About 20 s.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { restoreAndStart } from "../blackbox/lib/ops.mjs";
import { tempDir } from "../blackbox/lib/server.mjs";
import { Cluster, follow, groupOf, req, retryNoLeader, settledFollow, sleep, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 4;
const work = tempDir("runnel-cluster-admin-");
const dest = path.join(work, "backups");
let c, restored;
before(async () => {
  // snapshots every few entries: the fences travel in the groups' manifests
  c = await Cluster.start({ groups: GROUPS,
    args: ["--raft-snapshot-entries", "4", "--raft-snapshot-trailing", "1", "--backup-to", dest] });
});
after(async () => {
  if (restored) await restored.stop();
  c.stopChecked();
});

const admin = async (n, p, method = "GET") => {
  const r = await req(`${c.url(n)}/__runnel/admin/${p}`, { method, headers: c.admin, timeoutMs: 20000 });
  return { ...r, json: r.text ? JSON.parse(r.text) : null };
};
const names = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(2, "0")}`);
const A = names("a", 40);
const B = names("b", 12);

async function create(key, body = "x") {
  const r = await follow(`${c.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" }, body });
  assert.equal(r.status, 201, `${key}: ${r.status} ${r.text}`);
}

describe("answers that cover the cluster", () => {
  test("streams in every group, counted and listed through every node", async () => {
    for (const s of A) await create(`clus-a/${s}`, "aaa");
    for (const s of B) await create(`clus-b/${s}`);
    const groups = new Set(A.map((s) => groupOf(`clus-a/${s}`, GROUPS)));
    assert.equal(groups.size, GROUPS, "the bucket spans every group");
    await c.converged();
    for (let n = 1; n <= 3; n++) {
      const all = (await admin(n, "buckets")).json;
      assert.deepEqual(all.unreachable_groups, []);
      assert.deepEqual(all.unreachable_nodes, []);
      const a = all.buckets.find((b) => b.bucket === "clus-a");
      assert.equal(a.streams, 40, `node ${n} counts the whole cluster`);
      assert.equal(a.bytes.hot, 120);
      assert.equal(all.buckets.find((b) => b.bucket === "clus-b").streams, 12);
    }
  });

  test("pages of 7 merged from the groups' leaders: each stream once, in order", async () => {
    for (let n = 1; n <= 3; n++) {
      const seen = [];
      let cursor = null;
      for (let pages = 0; pages < 20; pages++) {
        const p = (await admin(n, `buckets/clus-a/streams?limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`)).json;
        assert.ok(p.streams.length <= 7 && p.streams.length > 0);
        seen.push(...p.streams.map((s) => s.stream));
        cursor = p.next_cursor;
        if (!cursor) break;
      }
      assert.deepEqual(seen, A, `node ${n}`);
    }
  });

  test("a page cut from complete node pages still says more", async () => {
    // two streams in each group: no node holds 8 alone unless it leads all 4
    const per = new Map();
    for (let i = 0; per.size < GROUPS || [...per.values()].some((v) => v.length < 2); i++) {
      const name = `c${i}`, g = groupOf(`clus-c/${name}`, GROUPS);
      if (!per.has(g)) per.set(g, []);
      if (per.get(g).length < 2) per.get(g).push(name);
    }
    const all = [...per.values()].flat();
    for (const name of all) await create(`clus-c/${name}`);
    const first = (await admin(1, "buckets/clus-c/streams?limit=7")).json;
    assert.equal(first.streams.length, 7);
    assert.equal(typeof first.next_cursor, "string", "one more stream follows");
    const rest = (await admin(2, `buckets/clus-c/streams?limit=7&cursor=${encodeURIComponent(first.next_cursor)}`)).json;
    assert.deepEqual([...first.streams, ...rest.streams].map((x) => x.stream), all.sort());
    assert.equal(rest.next_cursor, null);
  });

  test("one stream: its leader's state and every node's live readers", async () => {
    const key = "clus-a/a03";
    const g = groupOf(key, GROUPS);
    const readers = [];
    for (const n of [1, 2, 3]) {
      const ctl = new AbortController();
      const res = await fetch(`${c.url(n)}/${key}?offset=now&live=sse`, { signal: ctl.signal, redirect: "manual" });
      assert.equal(res.status, 200);
      readers.push(ctl);
    }
    try {
      await waitFor("three live readers counted", async () => (await admin(2, `buckets/clus-a/streams/a03`)).json.live_readers === 3);
      const s = (await admin(3, `buckets/clus-a/streams/a03`)).json;
      assert.equal(s.group, g);
      assert.equal(s.path, key);
      assert.equal(s.bytes_by_tier.hot, 3);
      assert.match(s.id, /^[0-9a-f]{16}$/);
      assert.equal(parseInt(s.id, 16) % 256, g, "its id carries its group");
    } finally {
      for (const ctl of readers) ctl.abort();
    }
  });

  test("usage: every node's counters, summed", async () => {
    const before = (await admin(1, "usage")).json;
    assert.equal(before.counters.length, 3);
    assert.deepEqual(before.counters.map((x) => x.node).sort(), [1, 2, 3]);
    const b0 = before.buckets.find((b) => b.bucket === "clus-b");
    for (let n = 1; n <= 3; n++) assert.equal((await req(`${c.url(n)}/clus-b/b00?offset=-1`)).status, 200);
    const after = (await admin(2, "usage")).json;
    const b1 = after.buckets.find((b) => b.bucket === "clus-b");
    assert.equal(b1.requests.reads, b0.requests.reads + 3, "a read on each node, counted where it was served");
    assert.equal(b1.bytes_out, b0.bytes_out + 3);
  });

  test("a peer's ask needs the cluster key's signature", async () => {
    const r = await req(`${c.url(1)}/__runnel/admin/buckets?scope=local&groups=0`);
    assert.equal(r.status, 401);
    assert.equal(JSON.parse(r.text).error.code, "INVALID_CREDENTIAL");
    const bad = await req(`${c.url(1)}/__runnel/admin/buckets?scope=local&groups=0`, {
      headers: { "runnel-peer-id": "2", "runnel-peer-time": String(Date.now()), "runnel-peer-signature": "0".repeat(64) } });
    assert.equal(bad.status, 403);
  });
});

describe("the purge of a cluster's bucket", () => {
  test("from a follower: recorded in every group, every stream gone", async () => {
    const first = await admin(2, "buckets/clus-a/purge", "POST");
    assert.ok(first.status === 202 || first.status === 200, first.text);
    assert.equal(first.json.purge.groups_fenced, GROUPS);
    assert.equal(first.json.purge.groups, GROUPS);
    await waitFor("the purge done", async () => (await admin(3, "buckets/clus-a")).json.purge.done);
    await c.converged();
    for (let n = 1; n <= 3; n++) {
      const b = (await admin(n, "buckets/clus-a")).json;
      assert.deepEqual(b.purge, { streams_left: 0, bytes_left: 0, groups_fenced: GROUPS, groups: GROUPS, done: true });
      assert.equal(b.streams, 0);
      assert.equal((await admin(n, "buckets/clus-b")).json.streams, 12, "the other bucket is whole");
    }
  });

  /* a 503 NO_LEADER (nothing read or applied) while a group elects is
   * retried as a client would: the fence is what is asserted */
  async function fenced(n) {
    const read = await retryNoLeader(() => req(`${c.url(n)}/clus-a/a00?offset=-1`));
    assert.equal(read.status, 404, `node ${n} read: ${read.text}`);
    assert.equal(JSON.parse(read.text).error.code, "BUCKET_ERASED");
    for (const key of ["clus-a/a00", "clus-a/new-one", "clus-a/zz"]) {
      const w = await settledFollow(`${c.url(n)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
      assert.equal(w.status, 404, `node ${n} create ${key}: ${w.status} ${w.text}`);
      assert.equal(JSON.parse(w.text).error.code, "BUCKET_ERASED");
    }
  }

  test("creates and reads refused on every node", async () => {
    for (let n = 1; n <= 3; n++) await fenced(n);
  });

  test("after the leader of a group is SIGKILLed, and on that node once it restarted", async () => {
    const g = groupOf("clus-a/new-one", GROUPS);
    const { node: dead, term } = await c.leaderOf(g);
    await c.crash(dead);
    const live = [1, 2, 3].filter((n) => n !== dead);
    await waitFor(`a new leader of group ${g}`, async () => {
      const r = await c.report(live[0]);
      return r.groups[g].leader && r.groups[g].leader !== dead && r.groups[g].term > term;
    }, 30000);
    for (let h = 0; h < GROUPS; h++) await c.leaderOf(h, 30000); /* every group led by a live node */
    for (const n of live) await fenced(n);
    await c.restart(dead);
    await c.converged();
    for (let n = 1; n <= 3; n++) await fenced(n);
    assert.equal((await admin(dead, "buckets/clus-a")).json.erased, true);
  });

  test("in a backup of the cluster taken afterwards, restored into one node", async () => {
    const r = await req(`${c.url(3)}/__runnel/backup?name=after-purge`, { method: "POST", headers: c.admin, timeoutMs: 120000 });
    assert.equal(r.status, 200, r.text);
    restored = await restoreAndStart(dest, "after-purge", path.join(work, "restored"));
    const refused = async (method, key) => {
      const w = await req(`${restored.url}/${key}`, { method, headers: { "content-type": "text/plain" } });
      assert.equal(w.status, 404, `${method} ${key}: ${w.status} ${w.text}`);
      assert.equal(JSON.parse(w.text).error.code, "BUCKET_ERASED");
    };
    await refused("GET", "clus-a/a00?offset=-1");
    for (let g = 0; g < GROUPS; g++) await refused("PUT", `clus-a/${A.find((k) => groupOf(`clus-a/${k}`, GROUPS) === g)}`);
    await refused("PUT", "clus-a/new-one");
    for (const key of B) assert.equal((await req(`${restored.url}/clus-b/${key}?offset=-1`)).status, 200, key);
  });
});

describe("groups out of reach", () => {
  test("with two nodes down the answer names the groups and nodes it lacks", async () => {
    await c.crash(2);
    await c.crash(3);
    await sleep(200);
    const r = await admin(1, "buckets");
    assert.equal(r.status, 200);
    assert.ok(r.json.unreachable_groups.length > 0, JSON.stringify(r.json));
    for (const g of r.json.unreachable_groups) assert.ok(Number.isInteger(g) && g >= 0 && g < GROUPS);
    const p = await admin(1, "buckets/clus-b/purge", "POST");
    assert.equal(p.status, 503, p.text);
    assert.equal(p.json.error.code, "NO_LEADER");
    assert.ok(p.json.unreachable_groups.length > 0);
    assert.ok(p.headers.get("retry-after"));
    await c.restart(2);
    await c.restart(3);
  });
});
