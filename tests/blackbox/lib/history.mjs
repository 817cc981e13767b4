// History tiering (--hot-bytes, src/tiers/history.c) in tests: a stream
// written in pieces that can be made again for any range (so a 1 GiB stream
// is never held in memory), appends that wait out 503 COLD_BACKPRESSURE,
// waits on the flush through the metrics, and the read-back checks
// (catch-up, immutable chunks, bootstrap), each byte-exact.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { assertError, get, req, sleep } from "./bucket.mjs";
import { parseMultipart, parseMultipartType } from "./multipart.mjs";
import { scrape } from "./ops.mjs";
import { CHUNK, MiB, enc, pseudoRandom } from "./snap.mjs";

export const PIECE = 2 * MiB; // bytes per append
const OCTET = "application/octet-stream";

// The offset token of a byte position.
export const offsetToken = (n) => `0000000000000000_${String(n).padStart(16, "0")}`;

// The bytes [from, to) of a stream that writeStream(url, seed, ...) wrote.
export function streamBytes(seed, from, to) {
  const parts = [];
  for (let k = Math.floor(from / PIECE); k * PIECE < to; k++) {
    const piece = pseudoRandom(PIECE, `${seed}/${k}`);
    parts.push(piece.subarray(Math.max(0, from - k * PIECE), Math.min(PIECE, to - k * PIECE)));
  }
  return Buffer.concat(parts);
}

// Appends body; a 503 COLD_BACKPRESSURE (the hot budget is held by history
// waiting for the cold store) must carry Retry-After and changes nothing:
// the same append is sent again after a pause, for at most waitMs. Returns
// how many refusals it met. With producer ({id, seq}) the append is a
// producer's, and a 503 a leadership change gives (OUTCOME_UNKNOWN,
// NO_LEADER, GROUP_RESTARTING) is repeated too: it applies once.
export async function appendThroughBackpressure(url, body, { waitMs = 120000, producer = null } = {}) {
  const end = Date.now() + waitMs;
  const headers = { "content-type": OCTET };
  if (producer) Object.assign(headers, { "producer-id": producer.id, "producer-epoch": "0", "producer-seq": String(producer.seq) });
  for (let refusals = 0; ; refusals++) {
    const r = await req(url, { method: "POST", headers, body, timeoutMs: 60000 });
    if (r.status === 204 || (producer && r.status === 200)) return refusals; /* 200: a producer's repeat */
    const code = /"code":"([A-Z_]+)"/.exec(r.text ?? "")?.[1];
    if (producer && r.status === 503 && ["OUTCOME_UNKNOWN", "NO_LEADER", "GROUP_RESTARTING"].includes(code)) {
      assert.ok(Date.now() < end, `appends still failing after ${waitMs} ms: ${r.text}`);
      refusals--; /* a leadership change, not the hot budget: the producer's retry applies once */
      await sleep(100);
      continue;
    }
    assertError(r, 503, "COLD_BACKPRESSURE", { what: "an append over the hot budget" });
    assert.ok(r.headers.get("retry-after"), "COLD_BACKPRESSURE carries Retry-After");
    assert.ok(Date.now() < end, `appends still refused after ${waitMs} ms`);
    await sleep(100);
  }
}

// Appends pieces [from, to) of the stream seed (offsets from * PIECE on).
// Returns the COLD_BACKPRESSURE refusals met. producer: a producer id the
// pieces are sent as (seq = piece index), so that a write whose outcome a
// leadership change left unknown can be repeated (a cluster).
export async function writeStream(url, seed, from, to, { producer = null } = {}) {
  let refusals = 0;
  for (let k = from; k < to; k++)
    refusals += await appendThroughBackpressure(url, pseudoRandom(PIECE, `${seed}/${k}`), { producer: producer && { id: producer, seq: k } });
  return refusals;
}

// Waits until nothing waits to move (flush lag 0) and at least coldBytes
// of history are in the cold store; returns the last scrape.
export async function waitFlushed(baseUrl, coldBytes, ms = 300000) {
  const end = Date.now() + ms;
  for (;;) {
    const m = await scrape(baseUrl);
    const lag = m.get("runnel_history_flush_lag_bytes");
    const cold = m.get("runnel_history_cold_bytes");
    if (lag === 0 && cold >= coldBytes) return m;
    assert.ok(Date.now() < end, `the flush did not catch up in ${ms} ms: lag ${lag}, cold ${cold} of ${coldBytes}`);
    await sleep(200);
  }
}

// Asserts that got equals want; a difference is described by its first
// stream offset (base + index), its extent and whether it reads as zeros.
export function assertSameBytes(got, want, what, base = 0) {
  if (got.equals(want)) return;
  let first = 0;
  while (first < Math.min(got.length, want.length) && got[first] === want[first]) first++;
  let last = Math.min(got.length, want.length) - 1;
  while (last > first && got[last] === want[last]) last--;
  const zeros = got.subarray(first, last + 1).every((b) => b === 0);
  assert.fail(`${what} are byte-exact: ${got.length} bytes for ${want.length}, they differ in` +
    ` [${base + first}, ${base + last + 1})${zeros ? ", which reads as zeros" : ""}`);
}

// Bytes the stream files under dataDir hold on disk (allocated blocks).
export function localStreamBytes(dataDir) {
  const dir = path.join(dataDir, "streams");
  let total = 0;
  for (const e of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile() && e.name.endsWith(".dat")) total += fs.statSync(path.join(e.parentPath ?? e.path, e.name)).blocks * 512;
  }
  return total;
}

// Reads [from, to) of the stream by catch-up reads, comparing each answer
// with the bytes written. Returns the number of reads.
export async function checkCatchUp(url, seed, from, to) {
  let off = from, reads = 0;
  while (off < to) {
    const r = await req(`${url}?offset=${enc(offsetToken(off))}`, { timeoutMs: 120000 });
    assert.equal(r.status, 200, `catch-up at ${off} answered ${r.status} ${r.text.slice(0, 300)}`);
    const next = Number(r.headers.get("stream-next-offset").split("_")[1]);
    assert.equal(next - off, r.body.length, `catch-up at ${off}: Stream-Next-Offset matches the body`);
    assert.ok(next > off, `catch-up at ${off} advances`);
    assertSameBytes(r.body, streamBytes(seed, off, next), `catch-up bytes [${off}, ${next}) of ${url}`, off);
    off = next;
    reads++;
  }
  assert.equal(off, to, "catch-up reaches the tail");
  return reads;
}

// Reads every chunk of the grid below `to` by the immutable chunk resource.
export async function checkChunks(url, token, seed, to, { every = 1 } = {}) {
  for (let c = 0; c * CHUNK < to; c += every) {
    const off = c * CHUNK, end = Math.min(to, off + CHUNK);
    const r = await req(`${url}/incarnation/${token}/chunk/${enc(offsetToken(off))}`, { timeoutMs: 120000 });
    assert.equal(r.status, 200, `chunk ${c} answered ${r.status} ${r.text.slice(0, 300)}`);
    assert.ok(r.body.equals(streamBytes(seed, off, end)), `chunk ${c} is byte-exact (${r.body.length} bytes)`);
    if (end < to) assert.equal(r.headers.get("stream-immutable"), "true", `chunk ${c} below the tail is immutable`);
  }
}

// Bootstrap: its update part holds the bytes from `start` (the snapshot's
// offset, or 0) on, at most 8 MiB of them.
export async function checkBootstrap(url, seed, start, tail) {
  const b = await get(`${url}/bootstrap`);
  assert.equal(b.status, 200, `bootstrap answered ${b.status} ${b.text.slice(0, 300)}`);
  const { boundary } = parseMultipartType(b.headers.get("content-type"));
  const { parts } = parseMultipart(b.body, boundary);
  const end = Math.min(tail, start + 8 * MiB);
  assert.ok(parts[1].body.equals(streamBytes(seed, start, end)), `bootstrap's updates [${start}, ${end}) are byte-exact`);
  return parts;
}
