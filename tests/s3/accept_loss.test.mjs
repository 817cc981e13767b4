// An accepted log loss with history tiering (--accept-loss with
// --hot-bytes over the S3 cold store; src/engine/accept_loss.c): the
// server never serves, nor moves to the cold store, bytes it cannot prove.
//
// The setup of issue 25's item A: three whole chunks wait for the cold
// store at a clean stop (their PUTs fail), so the checkpoint has them
// local; after the restart an append is logged, then the flush moves the
// chunks (TIER records after it, each punching its chunk out of the stream
// file); SIGKILL; the append's record is damaged by hand. The loss is
// accepted with the flag the refusal names.
//   - The moves read back after the damage: they prove the chunks are in
//     the cold store, so the stream keeps every byte before the damaged
//     append and reads back byte-exact (before the fix: 12 MiB of zeros
//     below Stream-Inherited-Offset), and the flush moves nothing again.
//   - The moves are damaged too: nothing proves the punched chunks, so the
//     stream keeps nothing from the first byte its file lacks on
//     (Stream-Inherited-Offset 0), and the S3 objects, the only good copy,
//     are never overwritten (before the fix: zeros served, and uploaded
//     over them).
// About 15 s.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { head, req, sleep } from "../blackbox/lib/bucket.mjs";
import { PIECE, checkCatchUp, streamBytes, waitFlushed, writeStream } from "../blackbox/lib/history.mjs";
import { scrape } from "../blackbox/lib/ops.mjs";
import { CHUNK, MiB, createStream, stopAndRemove } from "../blackbox/lib/snap.mjs";
import { Server } from "../blackbox/lib/server.mjs";
import { clearFaults, fault } from "./control.mjs";
import { objectBytes } from "./objects.mjs";
import { xorByte } from "../lib/damage.mjs";

const { S3_ENDPOINT, S3_BUCKET, S3_TEST_DIR } = process.env;
assert.ok(S3_ENDPOINT && S3_BUCKET && S3_TEST_DIR, "run through tests/s3/run_with_endpoint.sh");
const PIECES = 7; // 14 MiB: three whole chunks and a hot tail
const TAIL = PIECES * PIECE;

const servers = [];
after(async () => {
  await clearFaults();
  await stopAndRemove(...servers);
});

const segments = (dataDir) => {
  const wal = path.join(dataDir, "wal");
  return fs.readdirSync(wal).filter((n) => /^[0-9]{20}\.log$/.test(n)).sort().map((n) => path.join(wal, n));
};

// Every occurrence of needle in the log: [{seg, at}].
function findInLog(dataDir, needle) {
  const found = [];
  for (const seg of segments(dataDir)) {
    const data = fs.readFileSync(seg);
    for (let at = data.indexOf(needle); at >= 0; at = data.indexOf(needle, at + 1)) found.push({ seg, at });
  }
  return found;
}

// The one stream's id, from its data file's name.
function streamId(dataDir) {
  const top = path.join(dataDir, "streams");
  for (const d of fs.readdirSync(top)) {
    for (const f of fs.readdirSync(path.join(top, d))) {
      const m = /^([0-9a-f]{16})\.dat$/.exec(f);
      if (m) return BigInt(`0x${m[1]}`);
    }
  }
  throw new Error("no stream file");
}

// The S3 object of chunk c of the stream, as s3rver holds it.
const chunkObject = (prefix, id, c) =>
  objectBytes(`${prefix}/history/${id.toString(16).padStart(16, "0")}/${c.toString(16).padStart(16, "0")}`);

// Every chunk object of the stream holds what was written: a byte-exact copy.
function assertChunksIntact(prefix, id) {
  for (let c = 0; c < 3; c++) {
    assert.ok(chunkObject(prefix, id, c).equals(streamBytes(prefix, c * CHUNK, (c + 1) * CHUNK)), `chunk ${c}'s object is intact`);
  }
}

// A data directory as item A leaves it: the stream's three chunks moved
// after a logged append, whose record is then damaged; with damageMoves,
// the moves' records too. Returns the server (stopped) and the flag that
// accepts the loss.
async function damagedDirectory(prefix, { damageMoves }) {
  const srv = new Server({
    args: ["--cold-store=s3", "--s3-endpoint", S3_ENDPOINT, "--s3-bucket", S3_BUCKET, "--s3-prefix", `${prefix}/`,
      "--hot-bytes", String(64 * MiB), "--history-cache-bytes", String(32 * MiB)],
  });
  servers.push(srv);
  await srv.start();
  const url = `${srv.url}/loss/s`;
  await createStream(url);
  await fault({ method: "PUT", key_contains: `${prefix}/history/`, kind: "status", status: 500, count: 0 });
  await writeStream(url, prefix, 0, PIECES);
  assert.equal((await scrape(srv.url)).get("runnel_history_cold_bytes"), 0, "the chunks wait for the store");
  assert.equal((await srv.stop())?.code, 0, "a clean stop (its checkpoint holds the chunks local)");
  await srv.start();
  const marker = Buffer.from(`MARKER-${prefix}-${"m".repeat(64)}`);
  const r = await req(url, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: marker });
  assert.equal(r.status, 204, `the append after the checkpoint: ${r.status} ${r.text}`);
  await clearFaults();
  await waitFlushed(srv.url, 3 * CHUNK, 60000);
  await srv.stop("SIGKILL");

  const [m, ...more] = findInLog(srv.dataDir, marker);
  assert.ok(m && more.length === 0, "the append's record is in the log once");
  xorByte(m.seg, m.at + 10);
  if (damageMoves) {
    // TIER records: type 8, the stream id, a time, the cold end (u64 LE each)
    const id = Buffer.alloc(8);
    id.writeBigUInt64LE(streamId(srv.dataDir));
    const moves = findInLog(srv.dataDir, Buffer.concat([Buffer.from([8]), id]));
    assert.ok(moves.length >= 3, `the three moves are in the log (${moves.length} found)`);
    for (const t of moves) xorByte(t.seg, t.at + 12); // in the record's time: its CRC fails
  }
  srv.env = {};
  await srv.start({ waitReady: false });
  const exit = await srv.exited;
  assert.notEqual(exit.code, 0, "the damaged log is refused");
  const named = /--accept-loss=segment-[0-9]+/.exec(srv.log);
  assert.ok(named, `the refusal names the flag:\n${srv.logTail(10)}`);
  srv.args = [...srv.args, named[0]];
  return { srv, url, id: streamId(srv.dataDir) };
}

test("the moves that read back after the damage are kept: every byte before the damaged append, byte-exact", async () => {
  const { srv, url, id } = await damagedDirectory("al1", { damageMoves: false });
  await srv.start();
  const h = await head(url);
  assert.equal(h.headers.get("stream-inherited-offset"), `0000000000000000_${String(TAIL).padStart(16, "0")}`,
    "the stream keeps every byte before the damaged append");
  await checkCatchUp(url, "al1", 0, TAIL); // before the fix: zeros below 12 MiB
  const m = await scrape(srv.url);
  assert.equal(m.get("runnel_history_cold_bytes"), 3 * CHUNK, "the moved chunks are cold");
  await sleep(1000); // ten ticks of the flush
  assertChunksIntact("al1", id);
  assert.equal((await srv.stop())?.code, 0);
});

test("unproven moves: the stream keeps nothing from the first byte its file lacks; the objects stay intact", async () => {
  const { srv, url, id } = await damagedDirectory("al2", { damageMoves: true });
  await srv.start();
  const h = await head(url);
  assert.equal(h.status, 200);
  assert.equal(h.headers.get("stream-inherited-offset"), "0000000000000000_0000000000000000",
    "the inherited offset stops below the unproven bytes");
  assert.equal(h.headers.get("stream-next-offset"), "0000000000000000_0000000000000000", "nothing unproven is kept");
  const r = await req(`${url}?offset=0000000000000000_0000000000000000`);
  assert.equal(r.status, 200);
  assert.equal(r.body.length, 0, "no byte is served"); // before the fix: 14 MiB, the first 12 of them zeros
  await sleep(1000); // ten ticks of the flush: nothing moves, nothing is overwritten
  assertChunksIntact("al2", id);
  assert.match(srv.log, /kept only the bytes their files or a move that reads back prove/, "the log says what was cut");
  assert.equal((await srv.stop())?.code, 0);
});
