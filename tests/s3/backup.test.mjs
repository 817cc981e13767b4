// Backups to an S3 prefix and restores from it (issue 16 item 4;
// docs/BACKUP.md): runnel with --cold-store=s3 and --backup-to
// s3:backups/ against s3rver behind the SigV4-verifying proxy that
// tests/s3/run_with_endpoint.sh starts (every request's signature is
// recomputed; a wrong one fails the call, and so the test).
//
// WHAT IT PROVES
//   - A backup taken while a writer appends lands under the S3 prefix as
//     objects; a snapshot body already in the S3 cold store is referenced,
//     not copied (no object of the backup holds its bytes; the answer counts
//     it as referenced), a small local body is copied. The source tiers
//     history (--hot-bytes): a stream's whole 4 MiB chunks are S3 objects,
//     and the backup, taken after a restart (an empty read cache), reads
//     them back from S3 and copies them. While their GETs fail, the
//     backup answers 502 COLD_STORE_FAILED and writes no state object; the
//     retry under the same name succeeds.
//   - `runnel restore --from s3:backups/` (the same bucket, a cold store
//     prefix of the restored deployment's own, --source-s3-prefix naming
//     the source's) builds a new data directory: the streams hold a
//     whole-append prefix of the source covering every append acknowledged
//     before the backup was asked for; each is rewritten per §2.4 (new
//     token, previous token, inherited offset = tail); the referenced cold
//     body, copied into the restored deployment's prefix, reads back; the
//     tiered stream reads back byte-exact from the restored server, which
//     does not tier. A second restore (into another prefix: each restore
//     is a deployment) gives the same tokens.
//   - The same backup restored into a 3-node cluster of 2 groups with a
//     cold store prefix of its own: every node serves every stream as
//     above with the same tokens, the referenced body copied once into the
//     cluster's prefix and renamed for its stream's new id.
//   - A restore whose referenced cold body is gone from the source's cold
//     store is refused, naming the body, and writes no checkpoint; one
//     without --source-s3-prefix is refused, naming the option.
//   - A cold body a backup at the node's --backup-to references survives a
//     newer snapshot superseding it and the orphan sweeps past the grace, so
//     the backup still restores byte-exact (the body copied into the
//     restored deployment's own prefix); once the operator removed the
//     backup's state object, the sweep removes the body after the grace,
//     but not while another backup's state object cannot be read or does
//     not decode (fail safe).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";
import { assertError, head, put, req } from "../blackbox/lib/bucket.mjs";
import { runCli, scrape } from "../blackbox/lib/ops.mjs";
import { clearFaults, fault } from "./control.mjs";
import { objectsUnder } from "./objects.mjs";
import { Server, readAll, tempDir } from "../blackbox/lib/server.mjs";
import { clusterLayout } from "../cluster/runnel_cluster.mjs";
import { PIECE, streamBytes, waitFlushed, writeStream } from "../blackbox/lib/history.mjs";
import { CHUNK, MiB, publishOk, pseudoRandom } from "../blackbox/lib/snap.mjs";

const OCTET = "application/octet-stream";
const { S3_ENDPOINT, S3_BUCKET, S3_TEST_DIR } = process.env;
assert.ok(S3_ENDPOINT && S3_BUCKET && S3_TEST_DIR, "run through tests/s3/run_with_endpoint.sh");

const s3Opts = ["--s3-endpoint", S3_ENDPOINT, "--s3-bucket", S3_BUCKET, "--s3-timeout-ms", "5000"];
const coldOpts = ["--cold-store=s3", ...s3Opts, "--s3-prefix", "cold/"];
// a restored deployment's own cold store (each restore is a deployment of
// its own); the bodies the backup references are copied there from the
// source's
const restoredOpts = (name) => ["--cold-store=s3", ...s3Opts, "--s3-prefix", `restored-${name}/`];
const clusterOpts = ["--cold-store=s3", ...s3Opts, "--s3-prefix", "restored-cluster/"];
const work = tempDir("runnel-s3backup-");
const servers = [];
after(async () => {
  for (const s of servers) await s.stop();
});

const record = (i) => Buffer.from(`<${String(i).padStart(6, "0")}:${"y".repeat(100)}>`);

function restore(dir, own, extra = []) {
  return runCli(["restore", "--from", "s3:backups/", "--name", "s3one", "--data-dir", dir, ...own,
    "--source-s3-prefix", "cold/", ...extra], { timeoutMs: 120000 });
}

describe("a backup to an S3 prefix, restored from it", () => {
  const source = new Server({
    args: [...coldOpts, "--backup-to", "s3:backups/", "--hot-bytes", String(8 * MiB), "--history-cache-bytes", String(32 * MiB)],
  });
  const TIERED = 7 * PIECE; // three whole chunks in S3 and a hot tail
  servers.push(source);
  const big = pseudoRandom(MiB + 123, "cold body");
  const src = {};
  let ackedBefore;
  let tokens1;

  test("the backup completes under write load; the cold body is referenced, the small one copied", async () => {
    await source.start();
    const load = `${source.url}/s3bk/load`;
    const cold = `${source.url}/s3bk/cold`;
    const small = `${source.url}/s3bk/small`;
    assert.equal((await put(load, { type: OCTET })).status, 201);
    for (const u of [cold, small]) assert.equal((await put(u, { type: OCTET, body: "seed" })).status, 201);
    const coldTail = (await head(cold)).headers.get("stream-next-offset");
    src.coldDigest = await publishOk(cold, coldTail, big);
    src.coldOffset = coldTail;
    await publishOk(small, (await head(small)).headers.get("stream-next-offset"), Buffer.from("small body"));
    assert.ok(objectsUnder("cold/snapshots/").length === 1, "the 1 MiB body is in the S3 cold store");
    const tiered = `${source.url}/s3bk/tiered`;
    assert.equal((await put(tiered, { type: OCTET })).status, 201);
    await writeStream(tiered, "tiered", 0, TIERED / PIECE);
    await waitFlushed(source.url, 3 * CHUNK, 120000);
    await source.stop(); // the backup reads the tiered chunks from S3
    await source.start();
    await fault({ method: "GET", key_contains: "history/", kind: "status", status: 500, count: 0 });
    try {
      const f = await req(`${source.url}/__runnel/backup?name=s3one`, { method: "POST", timeoutMs: 120000 });
      assertError(f, 502, "COLD_STORE_FAILED", { what: "a backup whose cold history cannot be read" });
    } finally {
      await clearFaults();
    }
    assert.ok(!objectsUnder("backups/s3one/").includes("backups/s3one/state"), "no state object after the failure");

    let acked = 0;
    let running = true;
    const writer = (async () => {
      for (let i = 0; running && i < 100000; i++) {
        const r = await req(load, { method: "POST", headers: { "content-type": OCTET }, body: record(i) });
        assert.equal(r.status, 204, r.text);
        acked = i + 1;
      }
    })();
    while (acked < 30) await new Promise((r) => setTimeout(r, 20));
    ackedBefore = acked;
    const r = await req(`${source.url}/__runnel/backup?name=s3one`, { method: "POST", timeoutMs: 120000 });
    const afterBackup = acked;
    while (acked < afterBackup + 10) await new Promise((res) => setTimeout(res, 20));
    running = false;
    await writer;
    assert.equal(r.status, 200, `backup answered ${r.status} ${r.text}`);
    const fetches = (await scrape(source.url)).get("runnel_history_fetches_total");
    assert.ok(fetches >= 3, `the backup fetched the tiered chunks from S3 (${fetches} fetches)`);
    const summary = JSON.parse(r.text);
    assert.equal(summary.bodies_referenced, 1, r.text);
    assert.equal(summary.bodies_copied, 1, r.text);
    const keys = objectsUnder("backups/s3one/");
    assert.ok(keys.includes("backups/s3one/state"), `the state object: ${keys.join(" ")}`);
    assert.ok(keys.some((k) => k.startsWith("backups/s3one/data/")), "data pieces");
    assert.equal(keys.filter((k) => k.startsWith("backups/s3one/body/")).length, 1, "one body copied (the small one)");
    for (const p of ["load", "cold", "small", "tiered"]) {
      const u = `${source.url}/s3bk/${p}`;
      src[p] = { token: (await head(u)).headers.get("stream-incarnation"), body: (await readAll(u)).body };
    }
  });

  const check = async (srv) => {
    const tokens = {};
    const got = (await readAll(`${srv.url}/s3bk/load`)).body;
    const size = record(0).length;
    assert.equal(got.length % size, 0, "whole appends");
    assert.ok(got.length / size >= ackedBefore, `${got.length / size} appends restored, ${ackedBefore} acknowledged before the backup`);
    assert.ok(got.equals(src.load.body.subarray(0, got.length)), "a prefix of the source");
    assert.ok(src.tiered.body.equals(streamBytes("tiered", 0, TIERED)), "the source's tiered stream");
    assert.ok((await readAll(`${srv.url}/s3bk/tiered`)).body.equals(src.tiered.body), "the tiered stream, byte-exact");
    for (const p of ["load", "cold", "small", "tiered"]) {
      const h = await head(`${srv.url}/s3bk/${p}`);
      tokens[p] = h.headers.get("stream-incarnation");
      assert.notEqual(tokens[p], src[p].token, `${p}: a new token`);
      assert.equal(h.headers.get("stream-previous-incarnation"), src[p].token, `${p}: the source token`);
      assert.equal(h.headers.get("stream-inherited-offset"), h.headers.get("stream-next-offset"), `${p}: inherited = tail`);
    }
    const body = await req(`${srv.url}/s3bk/cold/snapshot/${encodeURIComponent(src.coldOffset)}`, { timeoutMs: 60000 });
    assert.equal(body.status, 200, body.text);
    assert.ok(body.body.equals(big), "the referenced cold body reads back");
    return tokens;
  };

  test("a restore from the S3 prefix into a new directory, twice: same bytes, same tokens", async () => {
    for (const name of ["r1", "r2"]) {
      const dir = path.join(work, name);
      const r = restore(dir, restoredOpts(name));
      assert.equal(r.code, 0, `restore exited ${r.code}: ${r.stderr}`);
      const srv = new Server({ dataDir: dir, args: restoredOpts(name) });
      servers.push(srv);
      await srv.start();
      const tokens = await check(srv);
      if (tokens1) assert.deepEqual(tokens, tokens1);
      tokens1 = tokens;
      await srv.stop();
    }
  });

  test("the same backup restored into a 3-node cluster on the same cold store: every node serves it", async () => {
    const layout = await clusterLayout({ clusterId: "s3-restored", groups: 2 });
    for (let n = 1; n <= 3; n++) {
      const r = restore(path.join(layout.dir, `node-${n}`), clusterOpts, layout.opts(n));
      assert.equal(r.code, 0, `restore of node ${n} exited ${r.code}: ${r.stderr}`);
    }
    const k = layout.start(clusterOpts);
    try {
      let first;
      for (let n = 1; n <= 3; n++) {
        // the referenced body was copied into the cluster's prefix: every node reads it from S3
        const tokens = await check({ url: k.url(n) });
        assert.deepEqual(tokens, first ?? tokens, `node ${n}: the tokens node 1 serves`);
        first = tokens;
      }
    } finally {
      k.stopChecked();
    }
  });

  test("a referenced cold body missing from the source's cold store: the restore is refused, naming it", () => {
    const r = restore(path.join(work, "r3"), ["--cold-store=s3", ...s3Opts, "--s3-prefix", "r3/"],
      ["--source-s3-prefix", "elsewhere/"]);
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, /references in the cold store at --source-s3-prefix "elsewhere\/", cannot be copied/);
    assert.match(r.stderr, /the S3 prefix it claimed belongs to that directory's deployment: restore again into a new prefix/,
      "a failed restore says that the prefix it claimed is taken");
    assert.ok(!fs.existsSync(path.join(work, "r3", "checkpoint")));
    const none = runCli(["restore", "--from", "s3:backups/", "--name", "s3one", "--data-dir", path.join(work, "r4"),
      "--cold-store=s3", ...s3Opts, "--s3-prefix", "r4/"], { timeoutMs: 120000 });
    assert.equal(none.code, 1, none.stdout);
    assert.match(none.stderr, /name that store's prefix with --source-s3-prefix/);
  });
});

describe("cold bodies a backup references are kept until the backup is retired", () => {
  // A cold prefix of its own: this node's 1 s sweep must not see other tests' bodies.
  const cold2 = ["--cold-store=s3", ...s3Opts, "--s3-prefix", "cold2/"];
  const node = new Server({ args: [...cold2, "--parts-grace-ms", "1000", "--backup-to", "s3:bkrefs/"] });
  servers.push(node);
  const old = pseudoRandom(MiB + 77, "superseded body");
  let url, oldOffset, oldKey;
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const stateFiles = (name) => {
    const dir = path.join(S3_TEST_DIR, "data", S3_BUCKET, "bkrefs", name);
    return fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.startsWith("state._S3rver")).map((f) => path.join(dir, f)) : [];
  };

  test("a superseded body the backup references survives the sweeps; the backup restores", async () => {
    await node.start();
    url = `${node.url}/bkrefs/s`;
    assert.equal((await put(url, { type: OCTET, body: "one" })).status, 201);
    oldOffset = (await head(url)).headers.get("stream-next-offset");
    await publishOk(url, oldOffset, old);
    [oldKey] = objectsUnder("cold2/snapshots/");
    assert.ok(oldKey, "the body is in the S3 cold store");
    const r = await req(`${node.url}/__runnel/backup?name=keep1`, { method: "POST", timeoutMs: 60000 });
    assert.equal(r.status, 200, r.text);
    assert.equal(JSON.parse(r.text).bodies_referenced, 1, r.text);
    assert.equal((await req(url, { method: "POST", headers: { "content-type": OCTET }, body: "two" })).status, 204);
    await publishOk(url, (await head(url)).headers.get("stream-next-offset"), pseudoRandom(MiB + 5, "newer body"));
    await sleep(3000); /* a dozen sweeps, the grace (1 s) twice over */

    const dir = path.join(work, "keep1");
    const own = ["--cold-store=s3", ...s3Opts, "--s3-prefix", "keep1/"];
    const rr = runCli(["restore", "--from", "s3:bkrefs/", "--name", "keep1", "--data-dir", dir, ...own,
      "--source-s3-prefix", "cold2/"], { timeoutMs: 120000 });
    assert.equal(rr.code, 0, `restore exited ${rr.code}: ${rr.stderr}`);
    assert.ok(objectsUnder("cold2/snapshots/").includes(oldKey), "the referenced body stays");
    const srv = new Server({ dataDir: dir, args: own });
    servers.push(srv);
    await srv.start();
    const body = await req(`${srv.url}/bkrefs/s/snapshot/${encodeURIComponent(oldOffset)}`, { timeoutMs: 60000 });
    assert.equal(body.status, 200, body.text);
    assert.ok(body.body.equals(old), "the restored snapshot reads byte-exact");
    await srv.stop();
  });

  test("once the backup's state object is removed, the body is swept after the grace; not while a state cannot be read or decoded", async () => {
    assert.ok(oldKey, "the previous test ran");
    const r = await req(`${node.url}/__runnel/backup?name=keep2`, { method: "POST", timeoutMs: 60000 });
    assert.equal(r.status, 200, r.text); /* it references only the newer body */
    await fault({ kind: "status", status: 500, code: "InternalError", op: "GetObject", key_contains: "bkrefs/keep2/state", count: 0 });
    try {
      const files = stateFiles("keep1");
      assert.ok(files.length > 0, "s3rver holds the state object");
      for (const f of files) fs.rmSync(f);
      await sleep(3000);
      assert.ok(objectsUnder("cold2/snapshots/").includes(oldKey), "a state object unreadable: every body stays");
    } finally {
      await clearFaults();
    }
    // keep2's state object, readable but not a state object (same length, so
    // s3rver serves it as before): every body stays, and the log names it
    const [content] = stateFiles("keep2").filter((f) => f.endsWith("._S3rver_object"));
    assert.ok(content, "s3rver holds keep2's state object");
    const good = fs.readFileSync(content);
    fs.writeFileSync(content, Buffer.alloc(good.length, "x"));
    try {
      await sleep(3000);
      assert.ok(objectsUnder("cold2/snapshots/").includes(oldKey), "a state object that does not decode: every body stays");
      assert.match(node.log, /keep2\/state does not decode/);
    } finally {
      fs.writeFileSync(content, good);
    }
    let left = true;
    for (let i = 0; i < 100 && left; i++) {
      await sleep(100);
      left = objectsUnder("cold2/snapshots/").includes(oldKey);
    }
    assert.ok(!left, "the body no backup references any more is gone");
    assert.equal(objectsUnder("cold2/snapshots/").length, 1, "the current body stays");
  });
});
