// Who owns an S3 cold store's prefix (issue 25, item B; src/tiers/s3owner.c,
// src/ops/restore.c): runnel against s3rver behind the SigV4-verifying
// proxy that tests/s3/run_with_endpoint.sh starts.
//
// WHAT IT PROVES
//   - A prefix belongs to one deployment, named by its owner object: a
//     second deployment (another data directory, so another cluster id)
//     started on it is refused, naming the owner; the owner restarts on it.
//   - The owner is checked before every removal: once the owner object
//     names another deployment, a superseded body and an orphan past the
//     grace stay, and no body is written any more.
//   - A restored deployment writes only its own keys (the case: a
//     restored server on the source's prefix overwrote the source's chunk
//     objects and its orphan sweep removed the source's newer snapshot
//     body): a restore into the source's prefix is refused; one into its
//     own prefix copies the body the backup references from the source's
//     (--source-s3-prefix), and the restored server tiers history and
//     sweeps there while every object of the source stays byte-exact and
//     the source serves its stream and its newer snapshot.
// About 30 s.
import assert from "node:assert/strict";
import path from "node:path";
import { after, test } from "node:test";
import { assertError, head, put, req, sleep } from "../blackbox/lib/bucket.mjs";
import { PIECE, checkCatchUp, waitFlushed, writeStream } from "../blackbox/lib/history.mjs";
import { runCli } from "../blackbox/lib/ops.mjs";
import { CHUNK, MiB, append, createStream, publish, publishOk, pseudoRandom, stopAndRemove } from "../blackbox/lib/snap.mjs";
import { Server, tempDir } from "../blackbox/lib/server.mjs";
import { objectBytes, objectsUnder, overwriteObject } from "./objects.mjs";

const OCTET = "application/octet-stream";
const { S3_ENDPOINT, S3_BUCKET, S3_TEST_DIR } = process.env;
assert.ok(S3_ENDPOINT && S3_BUCKET && S3_TEST_DIR, "run through tests/s3/run_with_endpoint.sh");
const s3Opts = ["--s3-endpoint", S3_ENDPOINT, "--s3-bucket", S3_BUCKET];
const cold = (prefix) => ["--cold-store=s3", ...s3Opts, "--s3-prefix", prefix];

const servers = [];
after(() => stopAndRemove(...servers));
function server(args, dataDir) {
  const s = new Server({ args, dataDir });
  servers.push(s);
  return s;
}

// Every object under prefix with its bytes: key -> Buffer.
const snapshotOf = (prefix) => new Map(objectsUnder(prefix).map((k) => [k, objectBytes(k)]));

test("a second deployment on a prefix another owns is refused at start; the owner restarts on it", async () => {
  const a = server(cold("own1/"));
  await a.start();
  const owner = objectBytes("own1/runnel-owner").toString();
  assert.match(owner, /^runnel-[0-9a-f]{16}\n$/, "the owner object names the deployment's cluster id");
  const b = server(cold("own1/"));
  await b.start({ waitReady: false });
  const exit = await Promise.race([b.exited, sleep(15000).then(() => null)]);
  if (!exit) await b.stop("SIGKILL");
  assert.ok(exit && exit.code !== 0, `the second deployment is refused (${JSON.stringify(exit)})`);
  assert.match(b.log, new RegExp(`prefix "own1/" is not this deployment's .*belongs to deployment ${owner.trim()}`));
  await a.stop();
  await a.start(); // the same data directory: the same cluster id
  assert.equal((await a.stop())?.code, 0);
});

test("the owner is checked before every removal: a prefix another deployment took loses nothing", async () => {
  const a = server([...cold("own2/"), "--parts-grace-ms", "1000"]);
  await a.start();
  const url = `${a.url}/own2/s`;
  await createStream(url);
  const first = await append(url, Buffer.from("one"));
  await publishOk(url, first, pseudoRandom(MiB + 1, "first body"));
  const [body1] = objectsUnder("own2/snapshots/");
  assert.ok(body1, "the body is an object");
  const owner = objectBytes("own2/runnel-owner");
  overwriteObject("own2/runnel-owner", Buffer.from(`runnel-${"f".repeat(16)}\n`)); // another deployment's now
  const second = await append(url, Buffer.from("two"));
  await publishOk(url, second, pseudoRandom(MiB + 2, "second body")); // supersedes the first: its removal is refused
  await sleep(2500); // ten orphan sweeps, the grace twice over
  assert.ok(objectsUnder("own2/snapshots/").includes(body1), "the superseded body stays"); // before: removed
  assert.match(a.log, /prefix "own2\/" is not this deployment's .*belongs to deployment runnel-f{16}/);
  const third = await append(url, Buffer.from("three"));
  assertError(await publish(url, third, pseudoRandom(MiB + 3, "third body")), 502, "COLD_STORE_FAILED",
    { what: "a publish into a prefix another deployment owns" });
  assert.equal(objectsUnder("own2/snapshots/").length, 2, "nothing more is written there");
  overwriteObject("own2/runnel-owner", owner);
  assert.equal((await a.stop())?.code, 0);
});

test("a restored deployment writes only its own keys; the source keeps every object", async () => {
  const src = server([...cold("src/"), "--hot-bytes", String(8 * MiB), "--history-cache-bytes", String(32 * MiB),
    "--parts-grace-ms", "1000", "--backup-to", "s3:bk/"]);
  await src.start();
  const tiered = `${src.url}/restore/t`;
  const snap = `${src.url}/restore/b`;
  await createStream(tiered);
  await writeStream(tiered, "src-t", 0, 7); // three whole chunks and a hot tail
  await waitFlushed(src.url, 3 * CHUNK, 60000);
  assert.equal((await put(snap, { type: OCTET, body: "seed" })).status, 201);
  const old = (await head(snap)).headers.get("stream-next-offset");
  await publishOk(snap, old, pseudoRandom(MiB + 10, "backed-up body"));
  const b = await req(`${src.url}/__runnel/backup?name=b1`, { method: "POST", timeoutMs: 60000 });
  assert.equal(b.status, 200, b.text);
  assert.equal(JSON.parse(b.text).bodies_referenced, 1, b.text);
  // after the backup: a newer snapshot, which the backup does not name
  const newer = await append(snap, Buffer.from("later"));
  const newerBody = pseudoRandom(MiB + 20, "newer body");
  await publishOk(snap, newer, newerBody);
  const before = snapshotOf("src/history/");
  const bodies = snapshotOf("src/snapshots/");
  assert.equal(before.size, 3, "three chunk objects");

  const restore = (dir, extra) =>
    runCli(["restore", "--from", "s3:bk/", "--name", "b1", "--data-dir", dir, "--cold-store=s3", ...s3Opts, ...extra],
      { timeoutMs: 120000 });
  const refused = restore(path.join(tempDir("runnel-own-"), "d"), ["--s3-prefix", "src/", "--source-s3-prefix", "src/"]);
  assert.equal(refused.code, 1, `a restore into the source's prefix is refused: ${refused.stdout}${refused.stderr}`);
  assert.match(refused.stderr, /prefix "src\/" is not the restored deployment's to write .*--s3-prefix of its own/);

  const dir = path.join(tempDir("runnel-own-"), "restored");
  const r = restore(dir, ["--s3-prefix", "dst/", "--source-s3-prefix", "src/"]);
  assert.equal(r.code, 0, `restore: ${r.stderr}`);
  const copied = objectsUnder("dst/snapshots/");
  assert.equal(copied.length, 1, `the referenced body is copied into the restored deployment's prefix: ${copied}`);
  assert.ok(objectBytes(copied[0]).equals(pseudoRandom(MiB + 10, "backed-up body")), "byte-exact");

  const dst = server([...cold("dst/"), "--hot-bytes", String(8 * MiB), "--history-cache-bytes", String(32 * MiB),
    "--parts-grace-ms", "1000"], dir);
  await dst.start();
  const rt = `${dst.url}/restore/t`;
  await checkCatchUp(rt, "src-t", 0, 7 * PIECE);
  await writeStream(rt, "dst-t", 7, 9); // its own bytes from here
  await waitFlushed(dst.url, 4 * CHUNK, 60000); // it tiers its own history, in its own prefix
  assert.equal(objectsUnder("dst/history/").length, 4, "the restored deployment's chunks are its own objects");
  const rb = await req(`${dst.url}/restore/b/snapshot/${encodeURIComponent(old)}`, { timeoutMs: 60000 });
  assert.equal(rb.status, 200, rb.text);
  assert.ok(rb.body.equals(pseudoRandom(MiB + 10, "backed-up body")), "the restored snapshot reads from its copy");
  await sleep(2500); // its orphan sweeps, the grace twice over
  assert.equal((await dst.stop())?.code, 0);

  for (const [k, v] of before) assert.ok(objectBytes(k).equals(v), `${k}: the source's chunk object is unchanged`);
  for (const [k, v] of bodies) assert.ok(objectBytes(k).equals(v), `${k}: the source's body is still there`);
  await src.stop();
  await src.start(); // an empty read cache: every cold byte from the source's objects
  await checkCatchUp(tiered, "src-t", 0, 7 * PIECE);
  const sb = await req(`${src.url}/restore/b/snapshot/${encodeURIComponent(newer)}`, { timeoutMs: 60000 });
  assert.equal(sb.status, 200, `the source's newer snapshot reads: ${sb.status} ${sb.text}`);
  assert.ok(sb.body.equals(newerBody), "byte-exact");
  assert.equal((await src.stop())?.code, 0);
});
