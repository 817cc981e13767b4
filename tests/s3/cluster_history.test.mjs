// History tiering in a cluster (issue 27, item 1): a 3-node cluster with
// --hot-bytes over one S3 cold store (s3rver behind the SigV4-verifying
// proxy that tests/s3/run_with_endpoint.sh starts), every node on the same
// prefix, which the cluster's id owns.
//
// WHAT IT PROVES
//   - A stream 8 times --hot-bytes is written through the hot budget: the
//     leader of its group puts each whole chunk once (one object per
//     chunk), and every replica gives its local copy back when the move's
//     command applies (each node's stream files hold the hot tail only).
//   - It reads back byte-exact from every node (catch-up, immutable
//     chunks, bootstrap); a follower keeps each chunk it gives back in its
//     read cache, as the leader keeps those it moves, and a node whose
//     cache is empty (restarted, or new) fetches them from S3.
//   - After the leader is SIGKILLed, the new leader moves the chunks
//     written since, and the old one, restarted, serves every byte.
//   - A follower wiped and re-added (an empty node under a new id, the way
//     a cluster replaces a node): it installs a snapshot naming the cold
//     end, fetches from its peers only the bytes above it, reads the rest
//     from S3, and serves every byte.
//   - A deleted stream's objects are removed once, by the leader of its
//     group (one listing of its prefix, not one per replica).
//   - An orphan planted under the prefix (history of a stream no group
//     holds) is removed once, by one node: the leader of its group.
// About 50 s.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Cluster, groupOf, operatorReq, req, waitFor } from "../cluster/runnel_cluster.mjs";
import {
  PIECE, checkBootstrap, checkCatchUp, checkChunks, localStreamBytes, waitFlushed, writeStream,
} from "../blackbox/lib/history.mjs";
import { scrape } from "../blackbox/lib/ops.mjs";
import { CHUNK, MiB, createStream } from "../blackbox/lib/snap.mjs";
import { control } from "./control.mjs";
import { objectsUnder, putObject } from "./objects.mjs";

const { S3_ENDPOINT, S3_BUCKET, S3_TEST_DIR } = process.env;
assert.ok(S3_ENDPOINT && S3_BUCKET && S3_TEST_DIR, "run through tests/s3/run_with_endpoint.sh");
const GROUPS = 2;
const HOT = 4 * MiB;
const KEY = "chist/big";
const SEED = "cluster-history";
const PREFIX = "ch/";

let c;
before(async () => {
  c = await Cluster.start({
    groups: GROUPS,
    args: ["--cold-store=s3", "--s3-endpoint", S3_ENDPOINT, "--s3-bucket", S3_BUCKET, "--s3-prefix", PREFIX,
      "--s3-timeout-ms", "20000", "--hot-bytes", String(HOT), "--history-cache-bytes", String(32 * MiB),
      "--parts-grace-ms", "2000", "--raft-snapshot-entries", "8", "--raft-snapshot-trailing", "2"],
  });
  await c.converged(); // the leaderships placement hands out, moved before the writes
});
after(() => c.stopChecked());

const url = (n) => `${c.url(n)}/${KEY}`;
const dataDir = (n) => path.join(c.dir, `node-${n}`);
const live = () => Array.from({ length: c.nodes }, (_, i) => i + 1).filter((n) => c.alive(n));
const moved = (tail) => Math.floor(tail / CHUNK) * CHUNK;
// The S3 calls the proxy saw since the last clear (at most its last 2000).
const calls = async (op, pred) => (await control("GET", "/requests")).filter((r) => r.op === op && pred(r));
// The ids of the streams with history objects.
const historyIds = () => new Set(objectsUnder(`${PREFIX}history/`).map((k) => k.split("/")[2]));

// Node n serves the stream byte-exact up to tail and its stream files
// hold no more than the hot tail (the chunks not yet due, and one being
// moved), however it came by its bytes.
async function servesEverything(n, tail, token) {
  await waitFlushed(c.url(n), moved(tail), 60000);
  await checkCatchUp(url(n), SEED, 0, tail);
  await checkChunks(url(n), token, SEED, tail, { every: 3 });
  await checkBootstrap(url(n), SEED, 0, tail);
  const local = localStreamBytes(dataDir(n));
  assert.ok(local <= tail - moved(tail) + 2 * CHUNK, `node ${n} holds the hot tail only (${local} bytes on disk)`);
}

describe(`a stream 8 times --hot-bytes (${HOT / MiB} MiB) on a 3-node cluster`, () => {
  const group = groupOf(KEY, GROUPS);
  let token, tail = 0, leader;

  test("written through the hot budget: the leader puts each chunk once, every replica gives its copy back", async () => {
    let startTerm;
    ({ node: leader, term: startTerm } = await c.leaderOf(group));
    await control("DELETE", "/requests");
    token = (await createStream(url(leader))).token;
    const pieces = (8 * HOT) / PIECE;
    const refusals = await writeStream(url(leader), SEED, 0, pieces, { producer: "chist" });
    tail = pieces * PIECE;
    console.log(`# ${tail / MiB} MiB written through node ${leader}, ${refusals} COLD_BACKPRESSURE refusals`);
    for (const n of live()) await waitFlushed(c.url(n), moved(tail), 60000);
    assert.equal(objectsUnder(`${PREFIX}history/`).length, moved(tail) / CHUNK, "one object per chunk");
    const puts = await calls("PutObject", (r) => r.key.startsWith(`${PREFIX}history/`) && r.status === 200);
    const { term } = await c.leaderOf(group);
    if (term === startTerm) assert.equal(puts.length, moved(tail) / CHUNK, `each chunk put once: ${puts.map((r) => r.key)}`);
    else /* a move in flight when the leadership changed is made again by the next leader */
      console.log(`# the leadership changed during the writes (term ${startTerm} to ${term}): ${puts.length} puts for ${moved(tail) / CHUNK} chunks`);
    for (const n of live()) {
      const local = localStreamBytes(dataDir(n));
      assert.ok(local <= tail - moved(tail) + 2 * CHUNK, `node ${n} holds the hot tail only (${local} bytes)`);
    }
  });

  test("reads back byte-exact from every node", async () => {
    for (const n of live()) await servesEverything(n, tail, token);
  });

  test("the leader SIGKILLed: its successor moves what comes next; restarted, it serves every byte", async () => {
    const old = leader;
    await c.crash(old);
    leader = await waitFor("a new leader", async () => {
      const l = await c.leaderOf(group, 30000);
      return l.node !== old ? l.node : null;
    }, 30000);
    const from = tail / PIECE;
    await writeStream(url(leader), SEED, from, from + (2 * CHUNK) / PIECE, { producer: "chist" });
    tail += 2 * CHUNK;
    for (const n of live()) await servesEverything(n, tail, token);
    assert.equal(objectsUnder(`${PREFIX}history/`).length, moved(tail) / CHUNK, "one object per chunk");
    await c.restart(old);
    await waitFor(`node ${old} ready`, async () => (await req(`${c.url(old)}/__runnel/readyz`)).status === 200, 60000, 250);
    await servesEverything(old, tail, token);
    assert.ok((await scrape(c.url(old))).get("runnel_history_fetches_total") > 0,
      `node ${old}, its read cache empty after the restart, fetched chunks from S3`);
  });

  test("a follower wiped and re-added: it fetches only the hot tail from its peers and serves every byte", async () => {
    const gone = live().find((n) => n !== leader);
    await c.crash(gone);
    const four = await c.addNode(4);
    const add = await operatorReq(`${c.url(leader)}/__runnel/cluster/members?${four.query}`, { method: "POST", headers: c.admin });
    assert.equal(add.status, 202, add.text);
    const del = await operatorReq(`${c.url(leader)}/__runnel/cluster/members/${gone}`, { method: "DELETE", headers: c.admin });
    assert.equal(del.status, 202, del.text);
    await waitFor("node 4 ready (a voter of every group, every gap filled)",
      async () => (await req(`${c.url(4)}/__runnel/readyz`)).status === 200, 90000, 250);
    await servesEverything(4, tail, token);
    assert.ok((await scrape(c.url(4))).get("runnel_history_fetches_total") > 0, "node 4 fetched chunks from S3");
  });

  test("a deleted stream's objects are removed once, by the leader of its group", async () => {
    const key = "chist/gone";
    const owner = (await c.leaderOf(groupOf(key, GROUPS))).node;
    const before = historyIds();
    await createStream(`${c.url(owner)}/${key}`);
    await writeStream(`${c.url(owner)}/${key}`, "gone", 0, (2 * CHUNK) / PIECE);
    const id = await waitFor("its two chunks moved", () => {
      const ids = [...historyIds()].filter((x) => !before.has(x));
      return ids.length === 1 && objectsUnder(`${PREFIX}history/${ids[0]}/`).length === 2 ? ids[0] : null;
    }, 30000, 100);
    for (const n of live()) await waitFlushed(c.url(n), 0, 30000); // the move applied everywhere
    await control("DELETE", "/requests");
    assert.equal((await req(`${c.url(owner)}/${key}`, { method: "DELETE" })).status, 204);
    await waitFor("its objects removed", () => objectsUnder(`${PREFIX}history/${id}/`).length === 0, 30000, 100);
    await c.converged(90000); // the leaderships may still move toward node 4 after its replacement
    const listings = await calls("ListObjectsV2", (r) => decodeURIComponent(r.query).includes(`prefix=${PREFIX}history/${id}/`));
    assert.equal(listings.length, 1, `one removal of its prefix, not one per replica (${listings.length})`);
  });

  test("an orphan planted under the prefix is removed once, by the leader of its group", async () => {
    // history of a stream of the group that no node issued (node byte 200)
    const id = ((0xabcden << 16n) | (200n << 8n) | BigInt(group)).toString(16).padStart(16, "0");
    const key = `${PREFIX}history/${id}/0000000000000000`;
    await putObject(key, Buffer.from("nobody's chunk"));
    const removals = () => live().map((n) => (c.log(n).match(/removing \d+ cold objects no state referenced/g) ?? []).length);
    const before = removals();
    await waitFor("the orphan removed", () => objectsUnder(key).length === 0, 30000, 200);
    await waitFor("the removal logged", () => removals().reduce((a, b) => a + b) > before.reduce((a, b) => a + b), 5000);
    const owner = (await c.leaderOf(group)).node;
    const nodes = live();
    const after = removals();
    nodes.forEach((n, i) => assert.equal(after[i] - before[i], n === owner ? 1 : 0,
      `node ${n}${n === owner ? ", the group's leader," : ""} removed ${after[i] - before[i]} times`));
    assert.equal(objectsUnder(`${PREFIX}history/`).length, moved(tail) / CHUNK, "every chunk of the stream stays");
  });
});
