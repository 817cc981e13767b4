// Backup and restore (issue 16 item 4; docs/BACKUP.md;
// extensions.txt §2.4 "History rewrites"). A server started with
// --backup-to DIR takes a backup on POST /__runnel/backup?name=NAME
// (`runnel backup NAME`) while it keeps serving; `runnel restore --from DIR
// --name NAME --data-dir NEW` builds a new data directory from it.
//
// WHAT IT PROVES
//   - Under write load (two writers appending numbered records), the
//     restored streams hold exactly a whole-append prefix of what the source
//     acknowledged: at least every append acknowledged before the backup was
//     asked for, none acknowledged after it answered, none of the later
//     ones: one instant, no torn or missing append.
//   - Every restored stream is a history rewrite (§2.4): a new
//     Stream-Incarnation, its source token as Stream-Previous-Incarnation,
//     its restored tail as Stream-Inherited-Offset; the old token as a
//     precondition gets 412 naming the new one; a producer's epoch claimed
//     before the backup answers epoch-closed;by=history with its last seq
//     as Producer-Closed-Seq. Forks, snapshots, closure and content types
//     come back.
//   - Restoring the same backup twice (two new directories) gives the same
//     tokens and bytes; a restore into a non-empty directory, of a name that
//     does not exist, or of a backup without its state object is refused and
//     writes no store.
//   - Refusals of the route: a bad name (400 INVALID_BACKUP_NAME), a name
//     taken (409 BACKUP_EXISTS), a server without --backup-to (501
//     NO_BACKUP_TARGET).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { assertError, head, put, req } from "./lib/bucket.mjs";
import { restoreAndStart, runCli } from "./lib/ops.mjs";
import { assert403, pwrite } from "./lib/producer.mjs";
import { BIN, Server, readAll, tempDir } from "./lib/server.mjs";
import { publishOk } from "./lib/snap.mjs";
import { record, recordWriter, wholeRecords } from "../lib/records.mjs";

const run = promisify(execFile);
const work = tempDir("runnel-backup-");
const dest = path.join(work, "backups");
const source = new Server({ args: ["--backup-to", dest] });
const restored = [];

before(() => source.start());
after(async () => {
  for (const s of [source, ...restored]) await s.stop();
});

const OCTET = "application/octet-stream";
const tokenOf = (r) => r.headers.get("stream-incarnation");

// Appends numbered records to url until stopped (w.acked: how many were
// acknowledged, for the "before the backup" bound).
const writer = (url, name) =>
  recordWriter(name, (i, body) => req(url, { method: "POST", headers: { "content-type": OCTET }, body }));

async function restoreInto(dir, name = "load") {
  const s = await restoreAndStart(dest, name, dir);
  restored.push(s);
  return s;
}

describe("a backup under write load, restored", () => {
  const v1 = (p) => source.stream(`bk/${p}`);
  const src = {}; // stream -> {token, tail, body} at the end of the load
  let answer;
  let ackedBefore;
  let ackedAfter;

  test("the backup completes while two writers append", async () => {
    for (const p of ["load1", "load2", "prod", "closed"]) {
      const r = await put(v1(p), { type: OCTET });
      assert.equal(r.status, 201);
    }
    for (let s = 0; s < 5; s++) {
      const r = await pwrite(v1("prod"), { id: "p1", epoch: 1, seq: s, body: `w${s}..`, type: OCTET });
      assert.equal(r.status, 200, `producer write ${s}: ${r.status} ${r.text}`);
    }
    assert.equal((await req(v1("closed"), { method: "POST", headers: { "content-type": OCTET, "stream-closed": "true" }, body: "end" })).status, 204);
    const mid = (await head(v1("prod"))).headers.get("stream-next-offset");
    const fork = await put(v1("fork"), { type: OCTET, headers: { "stream-forked-from": "/v1/stream/bk/prod", "stream-fork-offset": mid } });
    assert.equal(fork.status, 201, fork.text);
    assert.equal((await req(v1("fork"), { method: "POST", headers: { "content-type": OCTET }, body: "own" })).status, 204);
    const snap = `${source.url}/bkbk/snap`;
    assert.equal((await put(snap, { type: OCTET, body: "snapshot-source-bytes" })).status, 201);
    const snapTail = (await head(snap)).headers.get("stream-next-offset");
    src.digest = await publishOk(snap, snapTail, Buffer.from("the snapshot body"));
    src.snapOffset = snapTail;

    const w1 = writer(v1("load1"), "load1");
    const w2 = writer(v1("load2"), "load2");
    while (w1.acked < 50 || w2.acked < 50) await new Promise((r) => setTimeout(r, 20));
    ackedBefore = { load1: w1.acked, load2: w2.acked };
    const r = await req(`${source.url}/__runnel/backup?name=load`, { method: "POST", timeoutMs: 120000 });
    const afterBackup = { load1: w1.acked, load2: w2.acked };
    ackedAfter = afterBackup;
    while (w1.acked < afterBackup.load1 + 20 || w2.acked < afterBackup.load2 + 20) await new Promise((res) => setTimeout(res, 20));
    await w1.stop();
    await w2.stop();
    assert.equal(r.status, 200, `backup answered ${r.status} ${r.text}`);
    answer = JSON.parse(r.text);
    assert.equal(answer.name, "load");
    assert.ok(answer.streams >= 6 && answer.bodies_copied === 1, r.text);
    assert.ok(fs.existsSync(path.join(dest, "load", "state")), "the state object is written");
    for (const p of ["load1", "load2", "prod", "closed", "fork"]) {
      const hr = await head(v1(p));
      src[p] = { token: tokenOf(hr), tail: hr.headers.get("stream-next-offset"), body: (await readAll(v1(p))).body };
    }
    src.snap = { token: tokenOf(await head(snap)) };
    for (const p of ["load1", "load2"]) wholeRecords(src[p].body, p);
  });

  const checkRestored = async (s) => {
    const url = (p) => s.stream(`bk/${p}`);
    const tokens = {};
    for (const p of ["load1", "load2"]) {
      const got = (await readAll(url(p))).body;
      const n = wholeRecords(got, p);
      assert.ok(n >= ackedBefore[p], `${p}: the backup holds ${n} appends, ${ackedBefore[p]} were acknowledged before it was asked for`);
      // one append may have applied, unacknowledged, when the backup answered
      assert.ok(n <= ackedAfter[p] + 1, `${p}: the backup holds ${n} appends, ${ackedAfter[p]} were acknowledged when it answered`);
      assert.ok(n < src[p].body.length / record(p, 0).length, `${p}: appends after the backup are not in it`);
      assert.ok(got.equals(src[p].body.subarray(0, got.length)), `${p}: a prefix of the source`);
    }
    for (const p of ["prod", "closed", "fork"]) {
      assert.ok((await readAll(url(p))).body.equals(src[p].body), `${p}: the bytes of the source`);
    }
    for (const p of ["load1", "load2", "prod", "closed", "fork"]) {
      const hr = await head(url(p));
      assert.equal(hr.status, 200, p);
      tokens[p] = tokenOf(hr);
      assert.notEqual(tokens[p], src[p].token, `${p}: a new Stream-Incarnation`);
      assert.equal(hr.headers.get("stream-previous-incarnation"), src[p].token, `${p}: Stream-Previous-Incarnation`);
      assert.equal(hr.headers.get("stream-inherited-offset"), hr.headers.get("stream-next-offset"), `${p}: Stream-Inherited-Offset is the restored tail`);
      const pre = await head(url(p), { "stream-incarnation": src[p].token });
      assert.equal(pre.status, 412, `${p}: the source token as a precondition`);
      assert.equal(tokenOf(pre), tokens[p]);
    }
    assert.equal((await head(url("closed"))).headers.get("stream-closed"), "true");
    assert403(await pwrite(url("prod"), { id: "p1", epoch: 1, seq: 5, body: "w5..", type: OCTET }), "epoch-closed;by=history", 1, { closed: [1, 4] });
    const snap = await head(`${s.url}/bkbk/snap`);
    tokens.snap = tokenOf(snap);
    assert.notEqual(tokens.snap, src.snap.token);
    assert.equal(snap.headers.get("stream-previous-incarnation"), src.snap.token);
    assert.equal(snap.headers.get("stream-snapshot-digest"), src.digest);
    const body = await req(`${s.url}/bkbk/snap/snapshot/${encodeURIComponent(src.snapOffset)}`);
    assert.equal(body.status, 200, body.text);
    assert.equal(body.text, "the snapshot body");
    return tokens;
  };

  let first;
  test("a restore into a new directory: the bytes of one instant, every stream rewritten per §2.4", async () => {
    const s = await restoreInto(path.join(work, "restored1"));
    first = await checkRestored(s);
  });

  test("restoring the same backup again gives the same tokens (one rewrite per backup)", async () => {
    const s = await restoreInto(path.join(work, "restored2"));
    assert.deepEqual(await checkRestored(s), first);
  });

  test("a restore into a non-empty directory, of a missing or incomplete backup, is refused and writes no store", () => {
    const busy = path.join(work, "restored1");
    let r = runCli(["restore", "--from", dest, "--name", "load", "--data-dir", busy]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /not empty/);
    const none = path.join(work, "none");
    r = runCli(["restore", "--from", dest, "--name", "nosuch", "--data-dir", none]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /does not exist or is not complete/);
    assert.ok(!fs.existsSync(path.join(none, "checkpoint")));
    fs.cpSync(path.join(dest, "load"), path.join(dest, "partial"), { recursive: true });
    fs.rmSync(path.join(dest, "partial", "state"));
    const partial = path.join(work, "partial");
    r = runCli(["restore", "--from", dest, "--name", "partial", "--data-dir", partial]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /not complete/);
    assert.ok(!fs.existsSync(path.join(partial, "checkpoint")));
  });
});

describe("the backup route's refusals and the runnel backup command", () => {
  test("a bad name answers 400, a taken name 409; runnel backup takes one and prints its summary", async () => {
    assertError(await req(`${source.url}/__runnel/backup?name=..bad`, { method: "POST" }), 400, "INVALID_BACKUP_NAME");
    assertError(await req(`${source.url}/__runnel/backup`, { method: "POST" }), 400, "INVALID_BACKUP_NAME");
    const { stdout } = await run(BIN, ["backup", "cli1", "--url", source.url], { timeout: 60000 });
    assert.equal(JSON.parse(stdout).name, "cli1");
    assertError(await req(`${source.url}/__runnel/backup?name=cli1`, { method: "POST" }), 409, "BACKUP_EXISTS");
    await assert.rejects(run(BIN, ["backup", "cli1", "--url", source.url], { timeout: 60000 }), (e) => e.code === 1);
  });

  test("a server without --backup-to answers 501 NO_BACKUP_TARGET", async () => {
    const plain = new Server();
    restored.push(plain);
    await plain.start();
    assertError(await req(`${plain.url}/__runnel/backup?name=x`, { method: "POST" }), 501, "NO_BACKUP_TARGET");
  });
});
