// Backups of a cluster whose cold store is S3 (issue 27, item 1): a
// 3-node cluster with --hot-bytes over one S3 prefix and every node's
// --backup-to on one S3 destination, restored into a new 3-node cluster
// with a prefix of its own while the source keeps serving.
//
// WHAT IT PROVES
//   - A backup asked of a node that does not lead the snapshot's group
//     copies the cold snapshot body (the node that removes a superseded
//     body is that group's leader, so a reference could not hold it) and
//     reads the tiered history back from S3.
//   - A newer snapshot then supersedes the body: the leader of its group
//     removes the old object from the store, and the backup does not mind.
//   - The backup restores into a new cluster (its own cluster id and
//     prefix, no --source-s3-prefix: nothing is read from the source's
//     store) whose every node serves the tiered stream and the snapshot
//     body byte-exact, with the restored tokens.
//   - Meanwhile the source serves its own bytes and its newer snapshot,
//     and its history objects are untouched.
// About 40 s.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Cluster, clusterLayout, groupOf, req } from "../cluster/runnel_cluster.mjs";
import { PIECE, checkCatchUp, waitFlushed, writeStream } from "../blackbox/lib/history.mjs";
import { runCli } from "../blackbox/lib/ops.mjs";
import { CHUNK, MiB, createStream, publishOk, pseudoRandom } from "../blackbox/lib/snap.mjs";
import { objectBytes, objectsUnder } from "./objects.mjs";

const { S3_ENDPOINT, S3_BUCKET, S3_TEST_DIR } = process.env;
assert.ok(S3_ENDPOINT && S3_BUCKET && S3_TEST_DIR, "run through tests/s3/run_with_endpoint.sh");
const GROUPS = 2;
const HOT = 4 * MiB;
const TAIL = 4 * HOT; // three whole chunks moved, the fourth may be on its way
const SEED = "cluster-backup";
const s3 = ["--cold-store=s3", "--s3-endpoint", S3_ENDPOINT, "--s3-bucket", S3_BUCKET, "--s3-timeout-ms", "20000",
  "--hot-bytes", String(HOT), "--history-cache-bytes", String(32 * MiB), "--parts-grace-ms", "2000"];
const BIG = "cbkup/big", SNAP = "cbkup/snap";
const body1 = pseudoRandom(3 * MiB + 17, "cbk body 1");
const body2 = pseudoRandom(MiB + 5, "cbk body 2");

let c;
before(async () => {
  c = await Cluster.start({ groups: GROUPS, args: [...s3, "--s3-prefix", "cbk/", "--backup-to", "s3:cbk-backups/"] });
});
after(() => c.stopChecked());

const leaderUrl = async (key) => c.url((await c.leaderOf(groupOf(key, GROUPS))).node);
const snapshotOf = (url, offset) => req(`${url}/${SNAP}/snapshot/${encodeURIComponent(offset)}`, { timeoutMs: 60000 });
const bodyObjects = (prefix) => objectsUnder(`${prefix}snapshots/`);

describe("a cluster's backup with an S3 cold store, restored into a new cluster", () => {
  let offset1, offset2, backupNode, source = {};

  test("the backup, asked of a follower of the snapshot's group, copies the cold body", async () => {
    const big = await leaderUrl(BIG);
    await createStream(`${big}/${BIG}`);
    await writeStream(`${big}/${BIG}`, SEED, 0, TAIL / PIECE, { producer: "cbig" }); // an election's 503 is retried
    for (let n = 1; n <= 3; n++) await waitFlushed(c.url(n), 3 * CHUNK, 60000);
    const snap = await leaderUrl(SNAP);
    await createStream(`${snap}/${SNAP}`, { body: "first records" });
    offset1 = (await req(`${snap}/${SNAP}`, { method: "HEAD" })).headers.get("stream-next-offset");
    await publishOk(`${snap}/${SNAP}`, offset1, body1);
    const old = bodyObjects("cbk/");
    assert.equal(old.length, 1, `the body is one object of the shared store: ${old}`);

    backupNode = (await c.leaderOf(groupOf(SNAP, GROUPS))).node % 3 + 1; // not the group's leader
    const r = await req(`${c.url(backupNode)}/__runnel/backup?name=cb1`, { method: "POST", headers: c.admin, timeoutMs: 120000 });
    assert.equal(r.status, 200, `backup through node ${backupNode}: ${r.status} ${r.text}`);
    const summary = JSON.parse(r.text);
    assert.equal(summary.bodies_referenced, 0, r.text);
    assert.equal(summary.bodies_copied, 1, r.text);
    assert.equal(objectsUnder("cbk-backups/cb1/body/").length, 4, "the body's four pieces");

    // a newer snapshot supersedes the body: its group's leader removes the object
    assert.equal((await req(`${snap}/${SNAP}`, { method: "POST", body: "more", headers: { "content-type": "application/octet-stream" } })).status, 204);
    offset2 = (await req(`${snap}/${SNAP}`, { method: "HEAD" })).headers.get("stream-next-offset");
    await publishOk(`${snap}/${SNAP}`, offset2, body2);
    const deadline = Date.now() + 30000;
    while (bodyObjects("cbk/").includes(old[0])) {
      assert.ok(Date.now() < deadline, `the superseded body ${old[0]} was not removed`);
      await new Promise((res) => setTimeout(res, 100));
    }
    source.history = objectsUnder("cbk/history/").map((k) => [k, objectBytes(k)]);
    assert.ok(source.history.length >= 3, `the source's history objects: ${source.history.length}`);
  });

  test("restored into a new cluster with a prefix of its own; the source keeps serving", async () => {
    const layout = await clusterLayout({ clusterId: "cbk-restored", groups: GROUPS });
    const own = [...s3, "--s3-prefix", "cbk-restored/"];
    for (let n = 1; n <= 3; n++) {
      const r = runCli(["restore", "--from", "s3:cbk-backups/", "--name", "cb1", "--data-dir",
        path.join(layout.dir, `node-${n}`), ...own, ...layout.opts(n)], { timeoutMs: 120000 });
      assert.equal(r.code, 0, `restore of node ${n} exited ${r.code}: ${r.stderr}`);
    }
    assert.equal(bodyObjects("cbk-restored/").length, 1, "the body put into the restored prefix");
    const k = layout.start(own);
    try {
      for (let n = 1; n <= 3; n++) {
        await checkCatchUp(`${k.url(n)}/${BIG}`, SEED, 0, TAIL);
        const s = await snapshotOf(k.url(n), offset1);
        assert.equal(s.status, 200, `node ${n}: the restored snapshot: ${s.status} ${s.text.slice(0, 200)}`);
        assert.ok(s.body.equals(body1), `node ${n}: the restored snapshot is byte-exact`);
      }
      for (let n = 1; n <= 3; n++) { // the source, meanwhile
        await checkCatchUp(`${c.url(n)}/${BIG}`, SEED, 0, TAIL);
        const s = await snapshotOf(c.url(n), offset2);
        assert.equal(s.status, 200, `source node ${n}: its newer snapshot: ${s.status}`);
        assert.ok(s.body.equals(body2), `source node ${n}: its newer snapshot is byte-exact`);
      }
      for (const [key, bytes] of source.history)
        assert.ok(objectBytes(key).equals(bytes), `the source's ${key} is untouched`);
    } catch (e) {
      for (let n = 1; n <= 3; n++) console.log(`# restored node ${n}'s log:\n${k.log(n).slice(-3000)}`);
      throw e;
    } finally {
      k.stopChecked();
    }
  });
});
