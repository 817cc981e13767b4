// Checksummed stream data on a single node (issue 32 item 4). A stream's
// data file gets one flipped byte behind the server's back, as a failing
// disk would leave it; the node has no other copy, so:
//   - a catch-up read, a long-poll answered at once and an SSE read that
//     need the damaged block answer 500 STREAM_DATA_DAMAGED (an SSE read of
//     the v1 surface, which has no error events, sends the bytes before it
//     and ends), never a byte of it; reads of the stream's other blocks and of
//     other streams answer their bytes as before;
//   - the error log names the stream, the byte range and the file;
//   - the metrics count the bad block once however often it is read, as
//     unrepairable, and the blocks verified;
//   - once the block is known damaged, reads answer the bytes before it,
//     and a read starting in it is refused; an answer longer than one piece
//     whose later piece holds the block is cut (fewer bytes, all right),
//     and the retry gets the bytes up to the block;
// and the scrub (a second server, scrubbing fast) finds a flipped byte
// without any read, counted apart from damage reads find.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server, sleep } from "./lib/server.mjs";
import { assertError, openSse, req } from "./lib/bucket.mjs";
import { scrape } from "./lib/ops.mjs";
import { streamDataFile, xorByte } from "../lib/damage.mjs";

const BLOCK = 4096;
const TEXT = "text/plain";

// A text stream at url of `parts` appends of `size` bytes, the first
// starting with `marker`; returns its bytes and the offset after each append.
async function makeStream(url, marker, parts = 4, size = 5000) {
  assert.equal((await req(url, { method: "PUT", headers: { "content-type": TEXT } })).status, 201);
  let all = "";
  const after = [];
  for (let i = 0; i < parts; i++) {
    let body = (i === 0 ? marker : "") + `part${i}:`;
    while (body.length < size) body += String.fromCharCode(97 + ((body.length * 7 + i) % 26));
    const r = await req(url, { method: "POST", headers: { "content-type": TEXT }, body });
    assert.ok(r.status === 200 || r.status === 204, `append ${i}: ${r.status}`);
    all += body;
    after.push(r.headers.get("stream-next-offset"));
  }
  return { all, after };
}

describe("a flipped byte in a single node's stream file", () => {
  const server = new Server({ args: ["--scrub-bytes-per-second", "0"] });
  before(() => server.start());
  after(() => server.stop());

  test("reads of the damaged block are refused with a typed error; nothing else changes", async () => {
    const a = `${server.url}/v1/stream/sums/a`, b = `${server.url}/v1/stream/sums/b`;
    const sa = await makeStream(a, "MARK-A");
    const sb = await makeStream(b, "MARK-B");
    const file = streamDataFile(server.dataDir, "MARK-A");
    const at = 5100; /* in block 1, [4096, 8192): the second append's bytes */
    xorByte(file, at);

    for (const offset of ["-1", sa.after[0]]) {
      const r = await req(`${a}?offset=${offset}`);
      assertError(r, 500, "STREAM_DATA_DAMAGED", { what: `catch-up from ${offset}` });
    }
    const lp = await req(`${a}?offset=${sa.after[0]}&live=long-poll`);
    assertError(lp, 500, "STREAM_DATA_DAMAGED", { what: "a long-poll answered at once" });
    const sse = await openSse(`${a}?offset=-1&live=sse`); /* v1 has no error events: it ends */
    assert.equal(sse.status, 200);
    assert.ok(await sse.waitEnd(5000), "the SSE response ends");
    const sent = sse.events.filter((e) => e.type === "data").map((e) => e.data).join("");
    assert.ok(sent.length <= BLOCK, `nothing of the damaged block (${sent.length} bytes sent)`);
    assert.equal(sent, sa.all.slice(0, sent.length), "what was sent is the stream's bytes before it");

    // past the damaged block (the third append starts at byte 10000, in block 2)
    const past = await req(`${a}?offset=${sa.after[1]}`);
    assert.equal(past.status, 200);
    assert.equal(past.text, sa.all.slice(10000));
    const other = await req(`${b}?offset=-1`);
    assert.equal(other.status, 200);
    assert.equal(other.text, sb.all, "another stream reads as before");
    const headA = await req(a, { method: "HEAD" });
    assert.equal(headA.status, 200);

    // once known, the damage bounds reads: from the start, the bytes before the block
    const before = await req(`${a}?offset=-1`);
    assert.equal(before.status, 200);
    assert.equal(before.text, sa.all.slice(0, BLOCK), "the bytes before the damaged block");
    assertError(await req(`${a}?offset=${before.headers.get("stream-next-offset")}`), 500, "STREAM_DATA_DAMAGED", { what: "a read starting in the block" });

    assert.match(server.memoryLog, new RegExp(`stream_data_damaged: stream [0-9a-f]{16}: bytes ${BLOCK}\\.\\.${2 * BLOCK} of \\S+\\.dat do not match their checksum`));
    assert.match(server.memoryLog, /stream_data_unrepairable: stream sums\/a \([0-9a-f]{16}\): bytes 4096\.\.8192 are damaged/);
    const m = await scrape(server.url);
    assert.equal(m.get("runnel_data_blocks_damaged_read_total"), 1, "the block is counted once");
    assert.equal(m.get("runnel_data_blocks_unrepairable_total"), 1);
    assert.equal(m.get("runnel_data_blocks_damaged_scrub_total"), 0);
    assert.ok(m.get("runnel_data_blocks_verified_total") >= 4, "blocks were verified");
    assert.equal(m.get("runnel_scrub_bytes_total"), 0, "--scrub-bytes-per-second 0: no scrub");
  });
});

describe("a damaged block of a JSON stream", () => {
  const server = new Server({ args: ["--scrub-bytes-per-second", "0"] });
  before(() => server.start());
  after(() => server.stop());

  test("reads stop at the last whole message before the block; then a typed refusal", async () => {
    const url = `${server.url}/v1/stream/sums/json`;
    assert.equal((await req(url, { method: "PUT", headers: { "content-type": "application/json" } })).status, 201);
    const msgs = [];
    for (let i = 0; i < 40; i++) msgs.push({ m: i === 0 ? "MARK-J" : `message ${i}`, pad: "p".repeat(180) });
    for (let i = 0; i < 40; i += 10) {
      const r = await req(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(msgs.slice(i, i + 10)) });
      assert.ok(r.status === 200 || r.status === 204, `append ${i}: ${r.status}`);
    }
    const file = streamDataFile(server.dataDir, '{"m":"MARK-J"');
    xorByte(file, BLOCK + 300);
    assertError(await req(`${url}?offset=-1`), 500, "STREAM_DATA_DAMAGED", { what: "the first read" });
    const r = await req(`${url}?offset=-1`);
    assert.equal(r.status, 200);
    const got = JSON.parse(r.text);
    assert.ok(got.length > 0 && got.length < 40, `whole messages before the block (${got.length})`);
    assert.deepEqual(got, msgs.slice(0, got.length));
    assertError(await req(`${url}?offset=${r.headers.get("stream-next-offset")}`), 500, "STREAM_DATA_DAMAGED", { what: "the read after them" });
  });
});

describe("a damaged block past the first piece of a long answer", () => {
  const server = new Server({ args: ["--scrub-bytes-per-second", "0"] });
  before(() => server.start());
  after(() => server.stop());

  test("the answer is cut, never sent on; the retry stops short of the block, the next read is refused", async () => {
    const a = `${server.url}/v1/stream/sums/long`;
    const s = await makeStream(a, "MARK-L", 4, 200000); /* 800 kB: pieces of 256 KiB */
    const damagedAt = 600000, block = Math.floor(damagedAt / BLOCK) * BLOCK;
    xorByte(streamDataFile(server.dataDir, "MARK-L"), damagedAt);
    let first;
    try {
      first = await req(`${a}?offset=-1`);
    } catch {
      first = null; /* the connection was cut mid-body */
    }
    if (first) { /* what arrived is a prefix of the stream's bytes, short of its length */
      assert.ok(first.body.length < s.all.length, "not the whole answer");
      assert.equal(first.text, s.all.slice(0, first.body.length));
      assert.ok(first.body.length <= block, "nothing of the damaged block");
    }
    const retry = await req(`${a}?offset=-1`);
    assert.equal(retry.status, 200);
    assert.equal(retry.text, s.all.slice(0, block));
    const at = retry.headers.get("stream-next-offset");
    assertError(await req(`${a}?offset=${at}`), 500, "STREAM_DATA_DAMAGED", { what: "the read at the damaged block" });
  });
});

describe("the scrub", () => {
  const server = new Server({ args: ["--scrub-bytes-per-second", "10000000"] });
  before(() => server.start());
  after(() => server.stop());

  test("finds a flipped byte without any read", async () => {
    const a = `${server.url}/v1/stream/scrub/a`;
    await makeStream(a, "MARK-S", 3, 6000);
    const file = streamDataFile(server.dataDir, "MARK-S");
    xorByte(file, 13000); /* block 3 */
    let m;
    for (let i = 0; i < 100; i++) {
      m = await scrape(server.url);
      if (m.get("runnel_data_blocks_damaged_scrub_total") > 0) break;
      await sleep(100);
    }
    assert.equal(m.get("runnel_data_blocks_damaged_scrub_total"), 1);
    assert.equal(m.get("runnel_data_blocks_damaged_read_total"), 0, "no read found it");
    assert.ok(m.get("runnel_scrub_passes_total") >= 1, "the scrub finished a pass");
    assert.ok(m.get("runnel_scrub_bytes_total") >= 18000);
    assert.match(server.memoryLog, /stream_data_unrepairable: stream scrub\/a \([0-9a-f]{16}\): bytes 12288\.\.16384 are damaged/);
  });
});
