// Large appends written once (runnel serve --large-append-bytes N): on a
// single node an append or a create whose stored body is at least N bytes
// is written to its stream file and synced there, and the log gets a small
// record naming the range with the checksums of its blocks, not the bytes.
// With --large-append-bytes 65536:
//   - 8 appends of 1 MiB and a create with a 2 MiB body read back byte-exact,
//     while the log takes far less than the bytes appended (its bytes made
//     durable, runnel_wal_bytes_total, grow by less than 1 MiB for 10 MiB;
//     and no piece of any body is in a file of <data>/wal); with
//     --large-append-bytes 0 the same appends grow the log by at least the
//     bytes appended and every body is in its files (the option switches it);
//     runnel_appends_written_once_total and runnel_bytes_written_once_total
//     count the appends and bytes written once (and
//     runnel_appends_written_arriving_total the 8 appends, written while
//     their body arrived: arriving_appends.test.mjs); a body of N - 1 bytes goes
//     through the log, one of N bytes does not;
//   - after a SIGKILL and a restart on the same data directory (the log
//     replayed: its reference records) every byte reads back exact and the
//     reads verify the blocks (runnel_data_blocks_verified_total grows by the
//     blocks read at least);
//   - a byte flipped inside a large append's range in the .dat file while
//     the server is down (after a SIGKILL, so the restart replays the
//     reference record) is answered as damage on read (500
//     STREAM_DATA_DAMAGED, nothing of the damaged block, the bytes before it
//     exact): the replayed checksums are the recorded ones, not ones
//     recomputed from the file; and so is one in the first (512 KiB) piece of
//     a read from a large append's offset (an answer of several pieces),
//     the server staying up;
//   - a stream that took large appends, deleted and created again at the
//     same URL with other large appends, all in the log (no checkpoint),
//     holds exactly the new bytes after a SIGKILL and a restart, with a
//     Stream-Incarnation other than the first one's;
//   - idempotent-producer appends with large bodies: a repeat after a SIGKILL
//     and a restart answers 204 with the write's receipt and appends
//     nothing; the next seq appends;
//   - a JSON stream created and appended to with large arrays (stored form
//     above the threshold) reads back exact, before and after a SIGKILL.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Server, readAll, sleep } from "./lib/server.mjs";
import { assertError, head, req } from "./lib/bucket.mjs";
import { scrape } from "./lib/ops.mjs";
import { assertReceipt, off, pwrite } from "./lib/producer.mjs";
import { streamDataFile, xorByte } from "../lib/damage.mjs";

const MiB = 1 << 20;
const BLOCK = 4096;
const LARGE = 65536;
const OCTET = "application/octet-stream";
// checkpoints only at a stop: every record stays in the log until then
// (16 MiB log segments: the files bodiesInLog reads)
const NO_CHECKPOINT = ["--checkpoint-bytes", String(16 * 1024 * MiB), "--wal-segment-bytes", String(16 * MiB)];

// Random bytes starting with `marker` (so the stream's data file can be
// found by its first bytes).
function body(n, marker = "") {
  const b = crypto.randomBytes(n);
  b.write(marker, 0, "latin1");
  return b;
}

// An after() hook: SIGTERM, a checkpoint of what the log holds, exit 0.
const stopGracefully = (server) => async () => {
  const ex = await server.stop();
  assert.deepEqual(ex, { code: 0, signal: null }, `graceful stop: ${server.logTail(5)}`);
};

const metric = async (server, name) => (await scrape(server.url)).get(name);

// How many of the bodies have a piece (64 bytes from each of three places)
// in some file of the log directory.
function bodiesInLog(dataDir, bodies) {
  const dir = path.join(dataDir, "wal");
  const files = fs.readdirSync(dir).map((f) => path.join(dir, f)).filter((f) => fs.statSync(f).isFile()).map((f) => fs.readFileSync(f));
  assert.ok(files.length > 0, `the log directory ${dir} holds files`);
  return bodies.filter((b) => [0, b.length >> 1, b.length - 64].some((at) => files.some((f) => f.includes(b.subarray(at, at + 64))))).length;
}

// The stream's bytes from offset -1, page by page, until an answer that is
// not 200: {body, last} (last: that answer, or null when the read ended).
// An answer cut short (the damage found past its first piece) is asked again.
async function readUntilRefused(url) {
  let offset = "-1";
  const parts = [];
  let cut = 0;
  for (let i = 0; i < 1000; i++) {
    let r;
    try {
      r = await req(`${url}?offset=${offset}`);
    } catch (e) {
      assert.ok(++cut <= 3, `the read at ${offset} was cut ${cut} times: ${e.message}`);
      continue;
    }
    if (r.status !== 200) return { body: Buffer.concat(parts), last: r };
    parts.push(r.body);
    offset = r.headers.get("stream-next-offset");
    if (r.headers.get("stream-up-to-date") === "true") return { body: Buffer.concat(parts), last: null };
  }
  throw new Error("the read did not end within 1000 pages");
}

// A create with a 2 MiB body and 8 appends of 1 MiB; returns the bytes.
async function tenMiB(url, marker) {
  const bodies = [body(2 * MiB, marker)];
  const c = await req(url, { method: "PUT", headers: { "content-type": OCTET }, body: bodies[0] });
  assert.equal(c.status, 201, `create answered ${c.status} ${c.text}`);
  for (let i = 0; i < 8; i++) {
    const b = body(MiB);
    const r = await req(url, { method: "POST", headers: { "content-type": OCTET }, body: b });
    assert.equal(r.status, 204, `append ${i} answered ${r.status} ${r.text}`);
    bodies.push(b);
  }
  return bodies;
}

for (const threshold of [LARGE, 0]) {
  const once = threshold !== 0;
  describe(`--large-append-bytes ${threshold}: ${once ? "written once, the log takes references" : "every body through the log"}`, () => {
    const server = new Server({ args: ["--large-append-bytes", String(threshold), ...NO_CHECKPOINT] });
    before(() => server.start());
    after(stopGracefully(server));

    test("10 MiB read back exact; what the log took; a SIGKILL restart reads it all, verified", async () => {
      const url = server.stream("large/a");
      const m0 = await scrape(server.url);
      const w0 = m0.get("runnel_wal_bytes_total");
      const bodies = await tenMiB(url, "MARK-A");
      const all = Buffer.concat(bodies);
      const got = await readAll(url);
      assert.equal(got.body.length, all.length, "the tail");
      assert.ok(got.body.equals(all), "every byte as written");
      const m1 = await scrape(server.url);
      const logged = m1.get("runnel_wal_bytes_total") - w0;
      const inLog = bodiesInLog(server.dataDir, bodies);
      const delta = (name) => m1.get(name) - m0.get(name);
      assert.equal(delta("runnel_appends_written_once_total"), once ? bodies.length : 0, "appends written once");
      assert.equal(delta("runnel_bytes_written_once_total"), once ? all.length : 0, "their bytes");
      // the 8 POSTs were written while their body arrived; the create's body was read whole
      assert.equal(delta("runnel_appends_written_arriving_total"), once ? bodies.length - 1 : 0, "appends written as they arrived");
      if (once) {
        assert.ok(logged > 0, "the appends were logged (as references)");
        assert.ok(logged < MiB, `the log took ${logged} bytes for ${all.length} appended: less than 1 MiB`);
        assert.equal(inLog, 0, "no body is in the log's files");
      } else {
        assert.ok(logged >= all.length, `the log took ${logged} bytes for ${all.length} appended: at least as many`);
        assert.equal(inLog, bodies.length, "every body is in the log's files");
      }

      // a SIGKILL: the restart replays the log (references, or the bodies)
      await server.restart("SIGKILL");
      const v0 = await metric(server, "runnel_data_blocks_verified_total");
      const again = await readAll(url);
      assert.ok(again.body.equals(all), `every byte after the restart (${again.body.length} of ${all.length})`);
      const verified = (await metric(server, "runnel_data_blocks_verified_total")) - v0;
      assert.ok(verified >= all.length / BLOCK, `the read verified ${verified} blocks, expected at least ${all.length / BLOCK}`);
    });

    if (once) {
      test("the threshold: a body of N - 1 bytes goes through the log, one of N bytes does not", async () => {
        const url = server.stream("large/edge");
        assert.equal((await req(url, { method: "PUT", headers: { "content-type": OCTET } })).status, 201);
        const below = body(threshold - 1), at = body(threshold);
        let w = await metric(server, "runnel_wal_bytes_total");
        assert.equal((await req(url, { method: "POST", headers: { "content-type": OCTET }, body: below })).status, 204);
        const logBelow = (await metric(server, "runnel_wal_bytes_total")) - w;
        w += logBelow;
        assert.equal((await req(url, { method: "POST", headers: { "content-type": OCTET }, body: at })).status, 204);
        const logAt = (await metric(server, "runnel_wal_bytes_total")) - w;
        assert.ok(logBelow >= below.length, `${below.length} bytes: the log took ${logBelow}`);
        assert.ok(logAt < threshold / 8, `${at.length} bytes: the log took ${logAt}`);
        assert.equal(bodiesInLog(server.dataDir, [below]), 1, "the smaller body is in the log's files");
        assert.equal(bodiesInLog(server.dataDir, [at]), 0, "the other is not");
        assert.ok((await readAll(url)).body.equals(Buffer.concat([below, at])));
      });
    }
  });
}

describe("a flipped byte in a large append's range, found by the replayed checksums", () => {
  const server = new Server({ args: ["--large-append-bytes", String(LARGE), "--scrub-bytes-per-second", "0", ...NO_CHECKPOINT] });
  before(() => server.start());
  after(stopGracefully(server));

  test("damage is reported on read; the bytes before the block are exact", async () => {
    const url = server.stream("large/flip");
    const first = body(300000, "MARK-FLIP");
    assert.equal((await req(url, { method: "PUT", headers: { "content-type": OCTET }, body: first })).status, 201);
    const appended = [body(200000), body(500000)];
    for (const b of appended) assert.equal((await req(url, { method: "POST", headers: { "content-type": OCTET }, body: b })).status, 204);
    const all = Buffer.concat([first, ...appended]);
    // SIGKILL (no checkpoint: the records stay in the log), the flip while
    // the server is down, then the replay of the reference records
    await server.stop("SIGKILL");
    const file = streamDataFile(server.dataDir, "MARK-FLIP");
    const at = 500000 + 250000; // inside the second append, [500000, 1000000)
    const blockStart = Math.floor(at / BLOCK) * BLOCK;
    xorByte(file, at);
    await server.start();
    const v0 = await metric(server, "runnel_data_blocks_damaged_read_total");
    const r = await readUntilRefused(url);
    assert.ok(r.last, `the read is refused somewhere (it read ${r.body.length} bytes, all ${all.length} of the stream)`);
    assertError(r.last, 500, "STREAM_DATA_DAMAGED", { what: "the read of the damaged block" });
    assert.ok(r.body.length <= blockStart, `nothing of the damaged block (${r.body.length} bytes before the refusal; the block starts at ${blockStart})`);
    assert.ok(r.body.equals(all.subarray(0, r.body.length)), "the bytes before it are the stream's");
    assert.equal((await metric(server, "runnel_data_blocks_damaged_read_total")) - v0, 1, "one damaged block counted");
    assert.match(server.memoryLog, new RegExp(`stream_data_damaged: stream [0-9a-f]{16}: bytes ${blockStart}\\.\\.${blockStart + BLOCK} of \\S+\\.dat do not match their checksum`));
    // the blocks past it read as written
    const past = await req(`${url}?offset=${off(blockStart + BLOCK)}`);
    assert.equal(past.status, 200, `a read past the damaged block answered ${past.status} ${past.text.slice(0, 200)}`);
    assert.ok(past.body.length > 0 && past.body.equals(all.subarray(blockStart + BLOCK, blockStart + BLOCK + past.body.length)), "the bytes past the block");
  });
});

// A large append's read from its own offset is an answer of more than one
// piece (512 KiB): damage in its first piece is the case the long-answer
// test of data_checksums.test.mjs does not reach (there the damage is past
// the first piece).
describe("a flipped byte in the first piece of a large append's read", () => {
  const server = new Server({ args: ["--large-append-bytes", String(LARGE), "--scrub-bytes-per-second", "0", ...NO_CHECKPOINT] });
  before(() => server.start());
  after(stopGracefully(server));

  test("the read from the append's offset is refused as damage; the server goes on", async () => {
    const url = server.stream("large/first-piece");
    const first = body(300000, "MARK-FIRST");
    assert.equal((await req(url, { method: "PUT", headers: { "content-type": OCTET }, body: first })).status, 201);
    const big = body(MiB);
    assert.equal((await req(url, { method: "POST", headers: { "content-type": OCTET }, body: big })).status, 204);
    await server.stop("SIGKILL");
    const file = streamDataFile(server.dataDir, "MARK-FIRST");
    const at = 300000 + 5000, blockStart = Math.floor(at / BLOCK) * BLOCK;
    xorByte(file, at);
    await server.start();
    let r;
    try {
      r = await req(`${url}?offset=${off(300000)}`);
    } catch (e) {
      const ex = await Promise.race([server.exited, sleep(1000).then(() => null)]);
      assert.fail(`the read from the append's offset got no answer (${e.message}); the server ${ex ? `exited ${JSON.stringify(ex)}` : "is up"}`);
    }
    assertError(r, 500, "STREAM_DATA_DAMAGED", { what: "the read from the append's offset" });
    const all = Buffer.concat([first, big]);
    const before = await readUntilRefused(url);
    assert.ok(before.last, "a read from the start is refused at the block");
    assert.ok(before.body.equals(all.subarray(0, blockStart)), `the bytes before the block (${before.body.length}, expected ${blockStart})`);
    assert.ok(server.alive(), "the server is up");
  });
});

describe("a stream deleted and created again at its URL, all in the log", () => {
  const server = new Server({ args: ["--large-append-bytes", String(LARGE), ...NO_CHECKPOINT] });
  before(() => server.start());
  after(stopGracefully(server));

  test("after a SIGKILL it holds exactly the new incarnation's bytes", async () => {
    const url = server.stream("large/trap");
    const c1 = await req(url, { method: "PUT", headers: { "content-type": OCTET }, body: body(400000, "OLD") });
    assert.equal(c1.status, 201);
    const inc1 = c1.headers.get("stream-incarnation");
    assert.ok(inc1, "the create names its incarnation");
    for (let i = 0; i < 3; i++) assert.equal((await req(url, { method: "POST", headers: { "content-type": OCTET }, body: body(300000) })).status, 204);
    assert.equal((await req(url, { method: "DELETE" })).status, 204);
    // the new incarnation is shorter than the old one was (1.3 MB), so
    // bytes of the old one in its place would show past its tail too
    const fresh = [body(150000, "NEW")];
    const c2 = await req(url, { method: "PUT", headers: { "content-type": OCTET }, body: fresh[0] });
    assert.equal(c2.status, 201);
    const inc2 = c2.headers.get("stream-incarnation");
    assert.notEqual(inc2, inc1, "a new incarnation");
    for (let i = 0; i < 2; i++) {
      const b = body(100000 + i * 7000);
      assert.equal((await req(url, { method: "POST", headers: { "content-type": OCTET }, body: b })).status, 204);
      fresh.push(b);
    }
    const want = Buffer.concat(fresh);
    await server.restart("SIGKILL");
    const h = await head(url);
    assert.equal(h.status, 200);
    assert.equal(h.headers.get("stream-incarnation"), inc2, "the second incarnation's token");
    assert.equal(h.headers.get("stream-next-offset"), off(want.length), "the new incarnation's tail");
    const got = await readAll(url);
    assert.ok(got.body.equals(want), `exactly the new bytes (${got.body.length} read, ${want.length} expected)`);
    // and writable
    assert.equal((await req(url, { method: "POST", headers: { "content-type": OCTET }, body: body(LARGE) })).status, 204);
  });
});

describe("idempotent producers with large bodies", () => {
  const server = new Server({ args: ["--large-append-bytes", String(LARGE), ...NO_CHECKPOINT] });
  before(() => server.start());
  after(stopGracefully(server));

  test("a repeat after a SIGKILL restart is a duplicate (204) and appends nothing", async () => {
    const url = server.stream("large/producer");
    assert.equal((await req(url, { method: "PUT", headers: { "content-type": OCTET } })).status, 201);
    const bodies = [];
    let end = 0;
    for (let seq = 0; seq < 4; seq++) {
      const b = body(LARGE + seq * 40000);
      assertReceipt(await pwrite(url, { type: OCTET, epoch: 1, seq, body: b }), { status: 200, start: end, end: end + b.length, epoch: 1, seq }, `seq ${seq}`);
      end += b.length;
      bodies.push(b);
    }
    await server.restart("SIGKILL");
    const last = bodies[3];
    assertReceipt(await pwrite(url, { type: OCTET, epoch: 1, seq: 3, body: last }), { status: 204, start: end - last.length, end, epoch: 1, seq: 3 }, "the repeat after the restart");
    assert.equal((await head(url)).headers.get("stream-next-offset"), off(end), "the repeat appended nothing");
    const got = await readAll(url);
    assert.ok(got.body.equals(Buffer.concat(bodies)), `the bytes, each once (${got.body.length} read, ${end} expected)`);
    const next = body(LARGE * 2);
    assertReceipt(await pwrite(url, { type: OCTET, epoch: 1, seq: 4, body: next }), { status: 200, start: end, end: end + next.length, epoch: 1, seq: 4 }, "the next seq");
  });
});

describe("a JSON stream with large arrays", () => {
  const server = new Server({ args: ["--large-append-bytes", String(LARGE), ...NO_CHECKPOINT] });
  before(() => server.start());
  after(stopGracefully(server));

  test("created and appended with arrays above the threshold; reads back exact, before and after a SIGKILL", async () => {
    const url = server.stream("large/json");
    const msgs = (from, n) => Array.from({ length: n }, (_, i) => ({ i: from + i, pad: crypto.randomBytes(40).toString("hex") }));
    const parts = [msgs(0, 2000), msgs(2000, 1500), msgs(3500, 3000)];
    const text = parts.map((p) => JSON.stringify(p));
    assert.ok(text.every((t) => t.length > 2 * LARGE), "each array is well above the threshold");
    const w0 = await metric(server, "runnel_wal_bytes_total");
    assert.equal((await req(url, { method: "PUT", headers: { "content-type": "application/json" }, body: text[0] })).status, 201);
    for (const t of text.slice(1)) assert.equal((await req(url, { method: "POST", headers: { "content-type": "application/json" }, body: t })).status, 204);
    const logged = (await metric(server, "runnel_wal_bytes_total")) - w0;
    const total = text.reduce((a, t) => a + t.length, 0);
    assert.ok(logged < total / 10, `written once: the log took ${logged} bytes for ${total} of JSON`);
    const want = parts.flat();
    const read = async () => { // every page is an array of whole messages
      const got = [];
      let offset = "-1";
      for (let i = 0; i < 1000; i++) {
        const r = await req(`${url}?offset=${offset}`);
        assert.equal(r.status, 200, `read at ${offset} answered ${r.status} ${r.text.slice(0, 200)}`);
        got.push(...JSON.parse(r.text));
        offset = r.headers.get("stream-next-offset");
        if (r.headers.get("stream-up-to-date") === "true") return got;
      }
      assert.fail("the read did not end within 1000 pages");
    };
    assert.deepEqual(await read(), want);
    await server.restart("SIGKILL");
    assert.deepEqual(await read(), want, "after the restart");
  });
});
