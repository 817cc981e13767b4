// Catch-up reads answered a piece at a time (docs/ARCHITECTURE.md, "The
// read path"): a large answer is read from the stream and sent 512 KiB at
// a time as its client takes it, its Content-Length promised up front.
//   - what it sends is the stream's bytes, whole: octet streams, forks read
//     through their source, JSON arrays (v1) and NDJSON (bucket surface),
//     with ETag and 304 as for any read;
//   - between two pieces the stream may change: when the bytes the answer
//     promised may no longer be the stream's (retention advanced past the
//     next piece and punched them out, the stream was deleted, re-created
//     or rewritten), the connection is cut: the client sees fewer bytes
//     than the Content-Length, and every byte it sees is right;
//   - changes that leave those bytes alone (an append, retention below
//     what is left to send) do not cut it.
// A slow reader is a raw client that takes the head and a little of the
// body, stops reading for a while (the server's pieces then wait for the
// socket), and reads the rest after the change.
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { Server, sleep } from "./lib/server.mjs";
import { del, get, put, req } from "./lib/bucket.mjs";
import { append, enc, pseudoRandom, publishOk, stopAndRemove } from "./lib/snap.mjs";

const MiB = 1 << 20;
const server = new Server({ args: ["--test-hooks", "--max-read-bytes", String(64 * MiB)] });
before(() => server.start());
after(() => stopAndRemove(server));

const OCTET = "application/octet-stream";
const TOTAL = 48 * MiB; // far more than the socket buffers of a client that stops reading
let n = 0;

// A fresh octet stream holding `body` (appended 8 MiB at a time); returns
// its key (stream path), bucket-surface URL, v1 URL and tail.
async function octetStream(body) {
  const key = `pieces/s${++n}`;
  const bucketUrl = `${server.url}/${key}`;
  const r = await put(bucketUrl, { type: OCTET });
  assert.equal(r.status, 201, `create answered ${r.status} ${r.text}`);
  let tail;
  for (let at = 0; at < body.length; at += 8 * MiB) tail = await append(bucketUrl, body.subarray(at, at + 8 * MiB), OCTET);
  return { key, bucketUrl, v1Url: `${server.url}/v1/stream/${key}`, tail };
}

// Starts a catch-up read of `path` from the stream's start on a raw
// connection, takes its head and some body, then stops reading. Returns
// the reader: resume() reads on, ended() waits (bounded) until the whole
// body arrived or the server closed, and reports what came.
async function slowRead(path) {
  const sock = net.connect(server.port, "127.0.0.1");
  await new Promise((resolve, reject) => { sock.once("connect", resolve); sock.once("error", reject); });
  let head = null;
  let pending = Buffer.alloc(0); // bytes before the end of the head
  const chunks = []; // body bytes
  let bodyBytes = 0;
  let closed = false;
  sock.on("data", (d) => {
    if (head === null) {
      pending = Buffer.concat([pending, d]);
      const end = pending.indexOf("\r\n\r\n");
      if (end < 0) return;
      head = pending.subarray(0, end).toString("latin1");
      d = pending.subarray(end + 4);
    }
    chunks.push(d);
    bodyBytes += d.length;
  });
  sock.on("error", () => {});
  sock.on("close", () => { closed = true; });
  sock.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  const t0 = Date.now();
  while (head === null && !closed && Date.now() - t0 < 10000) await sleep(5);
  sock.pause();
  assert.ok(head !== null, "the answer's head arrived");
  const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1]);
  await sleep(300); // the server fills the socket buffers and waits for them to drain
  return {
    head,
    status: Number(head.slice(9, 12)),
    length,
    async ended() {
      sock.resume();
      const t1 = Date.now();
      while (!closed && bodyBytes < length && Date.now() - t1 < 20000) await sleep(10);
      sock.destroy();
      return { closed, body: Buffer.concat(chunks) };
    },
  };
}

// Asserts that a read was cut: fewer bytes than promised, each one right.
function assertCut(got, promised, expected, what) {
  assert.ok(got.body.length <= expected.length && got.body.equals(expected.subarray(0, got.body.length)),
    `${what}: every byte received is the stream's`);
  assert.ok(got.body.length < promised, `${what}: the answer was cut (${got.body.length} of ${promised} bytes)`);
  assert.ok(got.closed, `${what}: the connection was closed`);
}

function assertWhole(got, expected, what) {
  assert.equal(got.body.length, expected.length, `${what}: every byte arrived`);
  assert.ok(got.body.equals(expected), `${what}: the bytes are the stream's`);
}

describe("a large catch-up answer is the stream's bytes, whole", () => {
  test("an octet stream: 48 MiB, read to a slow reader, with ETag and 304", async () => {
    const body = pseudoRandom(TOTAL, "whole");
    const s = await octetStream(body);
    const r = await slowRead(`/v1/stream/${s.key}?offset=-1`);
    assert.equal(r.status, 200);
    assert.equal(r.length, TOTAL, "Content-Length is the whole answer");
    assert.match(r.head, new RegExp(`\r\nstream-next-offset: ${s.tail}`, "i"));
    assert.match(r.head, /\r\nstream-up-to-date: true/i);
    assertWhole(await r.ended(), body, "slow reader");
    const etag = /\r\netag: (\S+)/i.exec(r.head)?.[1];
    const again = await get(`${s.v1Url}?offset=-1`, { "if-none-match": etag });
    assert.equal(again.status, 304, "the answer's ETag answers 304");
  });

  test("a fork: its source's bytes, then its own", async () => {
    const a = pseudoRandom(20 * MiB, "source");
    const b = pseudoRandom(20 * MiB, "fork");
    const src = await octetStream(a);
    const forkUrl = `${server.url}/v1/stream/pieces/fork${++n}`;
    const r = await req(forkUrl, { method: "PUT", headers: { "content-type": OCTET, "stream-forked-from": `/v1/stream/${src.key}` } });
    assert.equal(r.status, 201, `fork answered ${r.status} ${r.text}`);
    for (let at = 0; at < b.length; at += 8 * MiB) await append(forkUrl, b.subarray(at, at + 8 * MiB), OCTET);
    const got = await get(`${forkUrl}?offset=-1`);
    assert.equal(got.status, 200);
    assertWhole(got, Buffer.concat([a, b]), "fork read");
  });

  test("JSON: a v1 array read and a bucket NDJSON read of the same messages", async () => {
    const key = `pieces/json${++n}`;
    const msgs = [];
    for (let i = 0; i < 20000; i++) msgs.push({ i, pad: "x".repeat(100 + (i % 50)) });
    const r = await put(`${server.url}/v1/stream/${key}`, { type: "application/json", body: JSON.stringify(msgs) });
    assert.equal(r.status, 201, `create answered ${r.status} ${r.text}`);
    const v1 = await get(`${server.url}/v1/stream/${key}?offset=-1`);
    assert.equal(v1.status, 200);
    assert.ok(v1.body.length > 1 * MiB, `the array is many pieces long (${v1.body.length} bytes)`);
    assert.deepEqual(JSON.parse(v1.text), msgs, "the array holds every message");
    const etag = v1.headers.get("etag");
    assert.equal((await get(`${server.url}/v1/stream/${key}?offset=-1`, { "if-none-match": etag })).status, 304);
    const nd = await get(`${server.url}/${key}?offset=-1`);
    assert.equal(nd.status, 200);
    assert.equal(nd.text, msgs.map((m) => JSON.stringify(m) + "\n").join(""), "NDJSON: the messages, one a line");
  });
});

// Starts a slow read of a fresh 48 MiB stream (with a snapshot at its tail,
// so that retention may advance to it), makes `change` to the stream while
// the answer waits for its client, and asserts the answer was cut.
async function assertCutBy(what, change) {
  const body = pseudoRandom(TOTAL, what);
  const s = await octetStream(body);
  await publishOk(s.bucketUrl, s.tail, "snapshot at the tail");
  const r = await slowRead(`/v1/stream/${s.key}?offset=-1`);
  await change(s);
  assertCut(await r.ended(), r.length, body, what);
}

// Appends 48 MiB of other bytes to the stream at url.
async function appendOther(url, from = 0) {
  for (let at = from; at < TOTAL; at += 8 * MiB) await append(url, Buffer.alloc(8 * MiB, 0x2a), OCTET);
}

describe("a large catch-up answer is cut when the stream changes under it", () => {
  test("retention advanced past it (its bytes punched out): cut, never wrong bytes", () =>
    assertCutBy("retention", async (s) => {
      const ret = await req(`${s.bucketUrl}/retention/${enc(s.tail)}`, { method: "PUT" });
      assert.ok(ret.status === 200 || ret.status === 204, `retention answered ${ret.status} ${ret.text}`);
    }));

  test("the stream deleted: cut, never wrong bytes", () =>
    assertCutBy("delete", async (s) => assert.equal((await del(s.v1Url)).status, 204)));

  test("the stream deleted and re-created with other bytes: cut, never the new bytes", () =>
    assertCutBy("re-create", async (s) => {
      assert.equal((await del(s.v1Url)).status, 204);
      assert.equal((await put(s.bucketUrl, { type: OCTET })).status, 201);
      await appendOther(s.bucketUrl);
    }));

  test("the stream rewritten (a new incarnation) and appended to: cut, never the new bytes", () =>
    assertCutBy("rewrite", async (s) => {
      const keep = `0000000000000000_${String(MiB).padStart(16, "0")}`;
      const rw = await req(`${server.url}/__runnel/test/rewrite/${s.key}?keep=${keep}`, { method: "POST" });
      assert.equal(rw.status, 204, `the rewrite hook answered ${rw.status} ${rw.text}`);
      await appendOther(s.bucketUrl, MiB);
    }));

  test("an append, and retention below what is left to send, do not cut it", async () => {
    const body = pseudoRandom(TOTAL, "keep");
    const s = await octetStream(body);
    await publishOk(s.bucketUrl, s.tail, "snapshot at the tail");
    const r = await slowRead(`/v1/stream/${s.key}?offset=-1`);
    const low = "0000000000000000_0000000000001024"; // inside the first piece, sent already
    const ret = await req(`${s.bucketUrl}/retention/${low}`, { method: "PUT" });
    assert.ok(ret.status === 200 || ret.status === 204, `retention answered ${ret.status} ${ret.text}`);
    await append(s.bucketUrl, Buffer.from("more"), OCTET);
    assertWhole(await r.ended(), body, "append and low retention");
  });
});
