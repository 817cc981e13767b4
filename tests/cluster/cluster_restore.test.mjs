// Cluster mode, black-box: a backup restored into a new cluster (issue 16
// item 4; docs/BACKUP.md; docs/ARCHITECTURE.md
// "Backups, restores and accepted losses"). A single-node server's backup
// is restored once per node (`runnel restore ... --node-id N --cluster-id
// --peer ... --groups 2`), then the three nodes start on those directories.
//
// WHAT IT PROVES
//   - Every node's directory holds the same state: each group's seeded
//     snapshot is byte-identical on the three nodes.
//   - Every stream (v1 and bucket surfaces, bytes and JSON, a producer's, a
//     published snapshot, a fork in its source's group and one the group
//     count puts in another group than its source, more than one 1 MiB
//     backup piece) serves the source's bytes on every node, leader and
//     followers, and is a §2.4 rewrite: a new Stream-Incarnation (the same
//     on every node), the source's token as Stream-Previous-Incarnation,
//     the tail as Stream-Inherited-Offset; the source token as a
//     precondition answers 412; the producer's epoch is closed by history.
//   - Writes after the restore work and replicate (appends, a new stream),
//     and a node SIGKILLed and restarted on its data keeps everything.
//   - A fourth node added later (--join, then the membership route) gets
//     the groups from the cluster (the seeded snapshot and the bytes it
//     names fetched from peers) and serves every stream the same.
//   - A running cluster's backup (2 groups, taken on a node) restored into
//     a new cluster of 3 groups: every stream on every node, §2.4 headers,
//     writes after it replicated; a bucket purged before the backup is
//     fenced in all 3 groups (creates in each answer 404 BUCKET_ERASED, and
//     the purge reads as done on every node).
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { head, put } from "../blackbox/lib/bucket.mjs";
import { runCli } from "../blackbox/lib/ops.mjs";
import { assert403, pwrite } from "../blackbox/lib/producer.mjs";
import { Server, readAll, tempDir } from "../blackbox/lib/server.mjs";
import { publishOk } from "../blackbox/lib/snap.mjs";
import { Cluster, clusterLayout, follow, groupOf, req, waitFor } from "./runnel_cluster.mjs";

const GROUPS = 2;
const OCTET = "application/octet-stream";
const work = tempDir("runnel-clrestore-");
const dest = path.join(work, "backups");
const source = new Server({ args: ["--backup-to", dest] });
let c;
const clusters = []; // still running

before(() => source.start());
after(async () => {
  await source.stop();
  for (const k of [...clusters]) stopCluster(k);
});

function stopCluster(k) {
  clusters.splice(clusters.indexOf(k), 1);
  k.stopChecked();
}

// A bucket key `rsbk/<prefix>-<i>` whose group is (or is not) `group`.
function keyWhere(prefix, test) {
  for (let i = 0; ; i++) {
    const key = `rsbk/${prefix}-${i}`;
    if (test(groupOf(key, GROUPS))) return key;
  }
}

const BASE = "rsbk/base";
const NEAR = keyWhere("fork", (g) => g === groupOf(BASE, GROUPS));
const FAR = keyWhere("xfork", (g) => g !== groupOf(BASE, GROUPS));

// Streams by their path below a node's URL.
const PATHS = ["v1/stream/rs/text", "v1/stream/rs/json", "v1/stream/rs/big", "rsbk/prod", "rsbk/snap", BASE, NEAR, FAR];
const src = {}; // path -> {token, tail, body}

async function post(url, body, type = OCTET) {
  const r = await req(url, { method: "POST", headers: { "content-type": type }, body });
  assert.equal(r.status, 204, `append to ${url}: ${r.status} ${r.text}`);
}

// A fresh cluster layout (clusterLayout), and `restoreAndStart(backup)`:
// backup restored into every node, then the cluster started.
async function clusterDir(name, groups = GROUPS) {
  const layout = await clusterLayout({ clusterId: `restored-${name}`, groups });
  const restoreAndStart = (backup) => {
    for (let n = 1; n <= 3; n++) {
      const r = restore(backup, path.join(layout.dir, `node-${n}`), layout.opts(n));
      assert.equal(r.code, 0, `restore of node ${n} exited ${r.code}: ${r.stderr}`);
    }
    const k = layout.start();
    clusters.push(k);
    return k;
  };
  return { ...layout, restoreAndStart };
}

function restore(name, dataDir, opts) {
  return runCli(["restore", "--from", dest, "--name", name, "--data-dir", dataDir, ...opts], { timeoutMs: 60000 });
}

describe("a single-node backup restored into a 3-node cluster", () => {
  test("the source's streams are backed up", async () => {
    const at = (p) => `${source.url}/${p}`;
    assert.equal((await put(at("v1/stream/rs/text"), { type: "text/plain" })).status, 201);
    for (let i = 0; i < 5; i++) await post(at("v1/stream/rs/text"), `line ${i}\n`, "text/plain");
    assert.equal((await put(at("v1/stream/rs/json"), { type: "application/json" })).status, 201);
    for (let i = 0; i < 3; i++) await post(at("v1/stream/rs/json"), JSON.stringify({ n: i, s: "x" }), "application/json");
    assert.equal((await put(at("v1/stream/rs/big"), { type: OCTET })).status, 201);
    for (let i = 0; i < 3; i++) await post(at("v1/stream/rs/big"), crypto.randomBytes(600 * 1024));
    assert.equal((await put(at("rsbk/prod"), { type: OCTET })).status, 201);
    for (let s = 0; s < 5; s++) {
      const r = await pwrite(at("rsbk/prod"), { id: "p1", epoch: 1, seq: s, body: `w${s}..`, type: OCTET });
      assert.equal(r.status, 200, `producer write ${s}: ${r.status} ${r.text}`);
    }
    assert.equal((await put(at("rsbk/snap"), { type: OCTET, body: "snapshot-source-bytes" })).status, 201);
    src.snapOffset = (await head(at("rsbk/snap"))).headers.get("stream-next-offset");
    src.digest = await publishOk(at("rsbk/snap"), src.snapOffset, Buffer.from("the snapshot body"));
    assert.equal((await put(at(BASE), { type: OCTET, body: "base-bytes" })).status, 201);
    const near = await put(at(NEAR), { type: OCTET, headers: { "stream-forked-from": BASE } });
    assert.equal(near.status, 201, near.text);
    await post(at(NEAR), "own-bytes");
    const far = await put(at(FAR), { type: OCTET, headers: { "stream-forked-from": BASE } });
    assert.equal(far.status, 201, far.text);
    await post(at(FAR), "far-bytes");
    const r = await req(`${source.url}/__runnel/backup?name=one`, { method: "POST", timeoutMs: 120000 });
    assert.equal(r.status, 200, `backup answered ${r.status} ${r.text}`);
    for (const p of PATHS) {
      const hr = await head(at(p));
      src[p] = { token: hr.headers.get("stream-incarnation"), tail: hr.headers.get("stream-next-offset"), body: (await readAll(at(p))).body };
    }
    assert.ok(src[NEAR].body.equals(Buffer.from("base-bytesown-bytes")), "the fork reads through its source");
    assert.ok(src[FAR].body.equals(Buffer.from("base-bytesfar-bytes")), "so does the far one");
  });

  let layout;
  test("every node's restore writes the same groups; the cluster starts on them", async () => {
    layout = await clusterDir("one");
    for (let n = 1; n <= 3; n++) {
      const r = restore("one", path.join(layout.dir, `node-${n}`), layout.opts(n));
      assert.equal(r.code, 0, `restore of node ${n} exited ${r.code}: ${r.stderr}`);
      assert.match(r.stdout, /restored 8 streams/);
    }
    for (let g = 0; g < GROUPS; g++) {
      const gdir = (n) => path.join(layout.dir, `node-${n}`, "raft", `g${String(g).padStart(2, "0")}`);
      const snap = (n) => fs.readdirSync(gdir(n)).filter((f) => /^snapshot-1-1-\d+$/.test(f));
      for (let n = 1; n <= 3; n++) assert.equal(snap(n).length, 1, `node ${n} group ${g}: one snapshot at index 1`);
      const bytes = (n) => fs.readFileSync(path.join(gdir(n), snap(n)[0]));
      for (let n = 2; n <= 3; n++) assert.ok(bytes(n).equals(bytes(1)), `group ${g}: node ${n}'s snapshot is node 1's`);
    }
    c = layout.start();
    clusters.push(c);
  });

  // Every stream as every node serves it (followers once caught up); paths:
  // those to check (a node hosts only the groups placed on it).
  async function checkEverywhere(extra = {}, nodes = [1, 2, 3], paths = PATHS) {
    const tokens = {};
    for (const n of nodes) {
      for (const p of paths) {
        const url = `${c.url(n)}/${p}`;
        const got = await waitFor(`node ${n} to serve ${p}`, async () => (await readAll(url)).body, 30000);
        const want = Buffer.concat([src[p].body, Buffer.from(extra[p] ?? "")]);
        assert.ok(got.equals(want), `node ${n} ${p}: the source's bytes (${got.length} vs ${want.length})`);
        const hr = await head(url);
        assert.equal(hr.status, 200, `HEAD ${p} on node ${n}`);
        const token = hr.headers.get("stream-incarnation");
        assert.notEqual(token, src[p].token, `${p}: a new Stream-Incarnation`);
        assert.equal(tokens[p] ?? token, token, `${p}: the same token on every node`);
        tokens[p] = token;
        assert.equal(hr.headers.get("stream-previous-incarnation"), src[p].token, `${p}: Stream-Previous-Incarnation`);
        assert.equal(hr.headers.get("stream-inherited-offset"), src[p].tail, `${p}: Stream-Inherited-Offset`);
        const pre = await head(url, { "stream-incarnation": src[p].token });
        assert.equal(pre.status, 412, `${p} on node ${n}: the source token as a precondition`);
      }
      if (!paths.includes("rsbk/snap"))
        continue;
      const snap = await req(`${c.url(n)}/rsbk/snap/snapshot/${encodeURIComponent(src.snapOffset)}`);
      assert.equal(snap.status, 200, `node ${n}: the snapshot: ${snap.status} ${snap.text}`);
      assert.equal(snap.text, "the snapshot body");
      assert.equal((await head(`${c.url(n)}/rsbk/snap`)).headers.get("stream-snapshot-digest"), src.digest);
    }
    return tokens;
  }

  test("every stream serves the source's bytes on every node, rewritten per §2.4", async () => {
    await checkEverywhere();
    const { node } = await c.leaderOf(groupOf("rsbk/prod", GROUPS));
    assert403(await pwrite(`${c.url(node)}/rsbk/prod`, { id: "p1", epoch: 1, seq: 5, body: "w5..", type: OCTET }),
      "epoch-closed;by=history", 1, { closed: [1, 4] });
  });

  test("writes after the restore replicate, and a restarted node keeps everything", async () => {
    const r = await follow(`${c.url(1)}/v1/stream/rs/text`, { method: "POST", headers: { "content-type": "text/plain" }, body: "after\n" });
    assert.equal(r.status, 204, r.text);
    const { node } = await c.leaderOf(groupOf(NEAR, GROUPS));
    assert.equal((await req(`${c.url(node)}/${NEAR}`, { method: "POST", headers: { "content-type": OCTET }, body: "+fork" })).status, 204);
    const made = await follow(`${c.url(2)}/rsbk/new`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "new stream" });
    assert.equal(made.status, 201, made.text);
    await c.converged();
    const extra = { "v1/stream/rs/text": "after\n", [NEAR]: "+fork" };
    const tokens = await checkEverywhere(extra);
    await c.crash(2);
    await c.restart(2);
    await c.converged();
    assert.deepEqual(await checkEverywhere(extra), tokens, "the same tokens after the restart");
    for (let n = 1; n <= 3; n++) {
      const got = await waitFor(`node ${n} to serve rsbk/new`, async () => (await readAll(`${c.url(n)}/rsbk/new`)).body, 30000);
      assert.equal(got.toString(), "new stream");
    }
  });

  test("a node added later (--join) gets its share of the restored groups from the cluster", async () => {
    const four = await c.addNode(4);
    const add = await req(`${c.url(1)}/__runnel/cluster/members?id=4&raft=${four.raft}&url=${encodeURIComponent(four.url)}`, { method: "POST", headers: c.admin });
    assert.equal(add.status, 202, add.text);
    const report = await waitFor("replicas moved onto node 4, nothing moving", async () => {
      const r = await c.report(1);
      return r.moves.length === 0 && r.groups.some((g) => g.placement.includes(4)) ? r : null;
    }, 60000, 250);
    await waitFor("node 4 ready (a voter of its groups, every gap filled)", async () => (await req(`${c.url(4)}/__runnel/readyz`)).status === 200, 60000, 250);
    const extra = { "v1/stream/rs/text": "after\n", [NEAR]: "+fork" };
    const hosted = PATHS.filter((p) => report.groups[groupOf(p.replace(/^v1\/stream\//, ""), GROUPS)].placement.includes(4));
    assert.ok(hosted.length > 0, "node 4 hosts some of the restored streams");
    assert.deepEqual(await checkEverywhere(extra, [4], hosted), await checkEverywhere(extra, [1], hosted), "node 4's tokens are node 1's");
  });
});

describe("a running cluster's backup restored into a new cluster with another group count", () => {
  test("every stream on every node of the new cluster, rewritten per §2.4; writes work", async () => {
    if (c) stopCluster(c); // two clusters at a time at most
    const from = await Cluster.start({ groups: 2, args: ["--backup-to", dest] });
    clusters.push(from);
    const keys = Array.from({ length: 6 }, (_, i) => `clbk/s${i}`);
    for (const key of [...keys, "clgone/a", "clgone/b", "clgone/c"]) {
      const made = await follow(`${from.url(1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: `${key}:first;` });
      assert.equal(made.status, 201, made.text);
    }
    for (const key of keys) {
      const r = await follow(`${from.url(2)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "second;" });
      assert.equal(r.status, 204, r.text);
    }
    const gone = (k, n) => req(`${k.url(n)}/__runnel/admin/buckets/clgone`, { headers: k.admin }).then((r) => JSON.parse(r.text));
    const purge = await req(`${from.url(1)}/__runnel/admin/buckets/clgone/purge`, { method: "POST", headers: from.admin });
    assert.ok(purge.status === 202 || purge.status === 200, purge.text);
    await waitFor("the purge of clgone", async () => (await gone(from, 1)).purge.done);
    const r = await req(`${from.url(3)}/__runnel/backup?name=whole`, { method: "POST", headers: from.admin, timeoutMs: 120000 });
    assert.equal(r.status, 200, `the cluster's backup: ${r.status} ${r.text}`);
    const want = {};
    for (const key of keys) {
      const hr = await head(`${from.url(3)}/${key}`);
      want[key] = { token: hr.headers.get("stream-incarnation"), tail: hr.headers.get("stream-next-offset") };
    }
    stopCluster(from);
    const k = (await clusterDir("whole", 3)).restoreAndStart("whole");
    await k.converged();
    for (let n = 1; n <= 3; n++) {
      for (const key of keys) {
        const url = `${k.url(n)}/${key}`;
        const got = await waitFor(`node ${n} to serve ${key}`, async () => (await readAll(url)).body, 30000);
        assert.equal(got.toString(), `${key}:first;second;`, `node ${n} ${key}`);
        const hr = await head(url);
        assert.notEqual(hr.headers.get("stream-incarnation"), want[key].token, `${key}: a new Stream-Incarnation`);
        assert.equal(hr.headers.get("stream-previous-incarnation"), want[key].token, `${key}: Stream-Previous-Incarnation`);
        assert.equal(hr.headers.get("stream-inherited-offset"), want[key].tail, `${key}: Stream-Inherited-Offset`);
      }
    }
    for (const key of keys) {
      const w = await follow(`${k.url(1)}/${key}`, { method: "POST", headers: { "content-type": "text/plain" }, body: "third;" });
      assert.equal(w.status, 204, `${key}: ${w.status} ${w.text}`);
    }
    await k.converged();
    for (let n = 1; n <= 3; n++)
      for (const key of keys) assert.equal((await readAll(`${k.url(n)}/${key}`)).body.toString(), `${key}:first;second;third;`);
    for (let g = 0; g < 3; g++) {
      let key = "clgone/x";
      while (groupOf(key, 3) !== g) key += "x";
      const w = await follow(`${k.url(g + 1)}/${key}`, { method: "PUT", headers: { "content-type": "text/plain" } });
      assert.equal(w.status, 404, `${key} (group ${g}): ${w.status} ${w.text}`);
      assert.equal(JSON.parse(w.text).error.code, "BUCKET_ERASED");
    }
    for (let n = 1; n <= 3; n++)
      assert.deepEqual((await gone(k, n)).purge, { streams_left: 0, bytes_left: 0, groups_fenced: 3, groups: 3, done: true }, `node ${n}`);
  });
});
