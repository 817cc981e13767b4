// Immutable reads.
// Covers extensions.txt §4.1 (GET/HEAD {stream}/incarnation/{token}/chunk/{offset}
// and .../snapshot/{offset}: the token in the path is the precondition, the
// request header has no effect, 404/410/416 before 412 with the current
// Stream-Incarnation, 400 for a query component or a token or offset not in
// the issued form, GET and HEAD only, the required response headers and the
// forbidden Stream-Up-To-Date / Stream-Cursor, chunk body = the stream's
// bytes in [Stream-Offset, Stream-Next-Offset), snapshot ranges as §2.5),
// §4.2 (the 4 MiB chunk grid: a read from inside a chunk ends at the next
// boundary; a JSON chunk may end inside a message), §4.3 (Stream-Immutable:
// true exactly when allowed: below the tail at the chunk end, at the tail of
// a closed stream with Stream-Closed: true, every snapshot 200/206; never at
// the tail of an open stream; 304 carries the marker and the §4.1 headers;
// closing keeps a below-tail chunk's ETag; If-None-Match compared weakly),
// with §2.4 (Stream-Incarnation on 410/416/412) and §11 error bodies.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, del, get, head, otherToken, post, raw, rawAsResponse, req, TWO_52, TWO_53 } from "./lib/bucket.mjs";
import {
  CHUNK, MiB, append, assertAbsent, createStream, enc, h, offsetAfter, publishOk, pseudoRandom, sha256, tok, stopAndRemove,
} from "./lib/snap.mjs";

const server = new Server();
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;
const fresh = () => `${server.url}/immut/s${++n}`;
const OCTET = "application/octet-stream";
const FORBIDDEN = ["stream-up-to-date", "stream-cursor"];

const chunkUrl = (url, token, offset) => `${url}/incarnation/${token}/chunk/${enc(offset)}`;
const snapUrl = (url, token, offset) => `${url}/incarnation/${token}/snapshot/${enc(offset)}`;

// A binary stream holding `size` pseudo-random bytes, with the offsets of
// its grid boundaries (o[k] = the offset after k*4 MiB, while within size).
async function bigStream(size = 10 * MiB, seed = "immut") {
  const url = fresh();
  const c = await createStream(url, { type: OCTET });
  const data = pseudoRandom(size, seed);
  for (let at = 0; at < size; at += 8 * MiB) await append(url, data.subarray(at, Math.min(size, at + 8 * MiB)), OCTET);
  const grid = [c.tail];
  for (let k = 1; k * CHUNK < size; k++) grid.push(await offsetAfter(url, CHUNK, grid[k - 1]));
  const tail = h(await head(url), "stream-next-offset");
  return { url, token: c.token, data, first: c.tail, grid, tail };
}

function assertChunk(r, { token, offset, next, type = OCTET, marked, closed = false, body }, what) {
  assert.equal(r.status, 200, `${what}: answered ${r.status} ${r.text}`);
  assert.equal(h(r, "content-type"), type, `${what}: Content-Type`);
  assert.equal(h(r, "stream-incarnation"), token, `${what}: Stream-Incarnation`);
  assert.equal(h(r, "stream-offset"), offset, `${what}: Stream-Offset is the requested offset`);
  if (next !== undefined) assert.equal(h(r, "stream-next-offset"), next, `${what}: Stream-Next-Offset`);
  assert.equal(h(r, "stream-immutable"), marked ? "true" : null, `${what}: Stream-Immutable ${marked ? "present" : "absent"}`);
  assert.equal(h(r, "stream-closed"), closed ? "true" : null, `${what}: Stream-Closed`);
  const etag = h(r, "etag");
  assert.ok(etag && /^"[\x21\x23-\x7e]*"$/.test(etag), `${what}: a strong ETag, got ${etag}`);
  assertAbsent(r, FORBIDDEN, what);
  if (body !== undefined) {
    assert.equal(r.body.length, body.length, `${what}: body length`);
    assert.ok(r.body.equals(body), `${what}: the body is the stream's bytes in [Stream-Offset, Stream-Next-Offset)`);
  }
}

describe("§4.2 / §4.3 chunks of a binary stream", () => {
  test("the grid: 4 MiB chunks below the tail are marked, the chunk at an open tail is not", async () => {
    const s = await bigStream();
    const c0 = await get(chunkUrl(s.url, s.token, s.grid[0]));
    assertChunk(c0, { token: s.token, offset: s.grid[0], next: s.grid[1], marked: true, body: s.data.subarray(0, CHUNK) }, "chunk 0");
    const c1 = await get(chunkUrl(s.url, s.token, s.grid[1]));
    assertChunk(c1, { token: s.token, offset: s.grid[1], next: s.grid[2], marked: true, body: s.data.subarray(CHUNK, 2 * CHUNK) }, "chunk 1");
    const c2 = await get(chunkUrl(s.url, s.token, s.grid[2]));
    assertChunk(c2, { token: s.token, offset: s.grid[2], next: s.tail, marked: false, body: s.data.subarray(2 * CHUNK) }, "chunk 2 (to the open tail)");
  });

  test("a read from inside a chunk ends at the next 4 MiB boundary", async () => {
    const s = await bigStream();
    for (const k of [1, 1000, CHUNK - 1]) {
      const off = await offsetAfter(s.url, k, s.first);
      const r = await get(chunkUrl(s.url, s.token, off));
      assertChunk(r, { token: s.token, offset: off, next: s.grid[1], marked: true, body: s.data.subarray(k, CHUNK) }, `from byte ${k}`);
    }
    const inLast = await offsetAfter(s.url, 2 * CHUNK + 12345, s.first);
    const r = await get(chunkUrl(s.url, s.token, inLast));
    assertChunk(r, { token: s.token, offset: inLast, next: s.tail, marked: false, body: s.data.subarray(2 * CHUNK + 12345) }, "inside the last chunk");
  });

  test("a stream of exactly 4 MiB: the chunk reaches its end at the open tail and is not marked", async () => {
    const s = await bigStream(CHUNK, "exact");
    const r = await get(chunkUrl(s.url, s.token, s.first));
    assertChunk(r, { token: s.token, offset: s.first, next: s.tail, marked: false, body: s.data }, "chunk ending at the open tail");
  });

  test("an empty chunk at the open tail: 200, Stream-Next-Offset = Stream-Offset, not marked", async () => {
    const s = await bigStream(1000, "small");
    const r = await get(chunkUrl(s.url, s.token, s.tail));
    assertChunk(r, { token: s.token, offset: s.tail, next: s.tail, marked: false, body: Buffer.alloc(0) }, "empty chunk at the open tail");
  });

  test("a chunk that ended at the tail is marked once appends pass its end, with the same leading bytes", async () => {
    const s = await bigStream(9 * MiB, "grow");
    const before = await get(chunkUrl(s.url, s.token, s.grid[2]));
    assertChunk(before, { token: s.token, offset: s.grid[2], next: s.tail, marked: false, body: s.data.subarray(2 * CHUNK) }, "before");
    const more = pseudoRandom(4 * MiB, "grow-more");
    await append(s.url, more, OCTET);
    const after = await get(chunkUrl(s.url, s.token, s.grid[2]));
    const expected = Buffer.concat([s.data, more]).subarray(2 * CHUNK, 3 * CHUNK);
    assertChunk(after, { token: s.token, offset: s.grid[2], marked: true, body: expected }, "after");
    assert.equal(h(after, "stream-next-offset"), await offsetAfter(s.url, CHUNK, s.grid[2]));
  });

  test("closing: the last chunk becomes marked with Stream-Closed; below-tail chunks keep ETag and body; the empty tail chunk is marked", async () => {
    const s = await bigStream();
    const c0 = await get(chunkUrl(s.url, s.token, s.grid[0]));
    const c1 = await get(chunkUrl(s.url, s.token, s.grid[1]));
    assert.equal((await post(s.url, undefined, { type: null, headers: { "stream-closed": "true" } })).status, 204);
    const c0b = await get(chunkUrl(s.url, s.token, s.grid[0]));
    assertChunk(c0b, { token: s.token, offset: s.grid[0], next: s.grid[1], marked: true, body: c0.body }, "chunk 0 after the close");
    assert.equal(h(c0b, "etag"), h(c0, "etag"), "closing does not change a below-tail marked chunk's ETag");
    const c1b = await get(chunkUrl(s.url, s.token, s.grid[1]));
    assert.equal(h(c1b, "etag"), h(c1, "etag"));
    assert.equal(h(c1b, "stream-closed"), null, "a chunk ending below the tail carries no Stream-Closed");
    const c2 = await get(chunkUrl(s.url, s.token, s.grid[2]));
    assertChunk(c2, { token: s.token, offset: s.grid[2], next: s.tail, marked: true, closed: true, body: s.data.subarray(2 * CHUNK) }, "last chunk of the closed stream");
    const empty = await get(chunkUrl(s.url, s.token, s.tail));
    assertChunk(empty, { token: s.token, offset: s.tail, next: s.tail, marked: true, closed: true, body: Buffer.alloc(0) }, "empty chunk at the closed tail");
  });

  test("a stream created closed and empty: the chunk at its tail is marked and closed", async () => {
    const url = fresh();
    const c = await createStream(url, { type: OCTET, headers: { "stream-closed": "true" } });
    const r = await get(chunkUrl(url, c.token, c.tail));
    assertChunk(r, { token: c.token, offset: c.tail, next: c.tail, marked: true, closed: true, body: Buffer.alloc(0) }, "empty closed stream");
  });

  test("the ETag and body are stable across requests; If-None-Match (strong or W/) answers 304 with the marker and the §4.1 headers", async () => {
    const s = await bigStream(5 * MiB, "etag");
    const a = await get(chunkUrl(s.url, s.token, s.grid[0]));
    const b = await get(chunkUrl(s.url, s.token, s.grid[0]));
    assert.equal(h(a, "etag"), h(b, "etag"));
    assert.equal(sha256(a.body), sha256(b.body));
    const etag = h(a, "etag");
    for (const inm of [etag, `W/${etag}`, `"x", ${etag}`]) {
      const r = await get(chunkUrl(s.url, s.token, s.grid[0]), { "if-none-match": inm });
      assert.equal(r.status, 304, `If-None-Match: ${inm}`);
      assert.equal(r.body.length, 0);
      for (const name of ["content-type", "stream-incarnation", "stream-offset", "stream-next-offset", "etag", "stream-immutable"]) {
        assert.equal(h(r, name), h(a, name), `304 (${inm}): ${name}`);
      }
      assert.equal(h(r, "stream-immutable"), "true", "the 304 of a marked response carries the marker");
      assertAbsent(r, FORBIDDEN, "304");
    }
    const other = await get(chunkUrl(s.url, s.token, s.grid[0]), { "if-none-match": '"not-it"' });
    assert.equal(other.status, 200);
  });

  test("an unmarked chunk's ETag changes when its bytes do: revalidating the old tag after an append answers 200 with the new bytes", async () => {
    const s = await bigStream(1000, "grow-etag");
    const a = await get(chunkUrl(s.url, s.token, s.first));
    assertChunk(a, { token: s.token, offset: s.first, next: s.tail, marked: false, body: s.data }, "before the append");
    const more = Buffer.from("appended");
    const tail = await append(s.url, more, OCTET);
    const r = await get(chunkUrl(s.url, s.token, s.first), { "if-none-match": h(a, "etag") });
    assertChunk(r, { token: s.token, offset: s.first, next: tail, marked: false, body: Buffer.concat([s.data, more]) }, "revalidation after the append");
    assert.notEqual(h(r, "etag"), h(a, "etag"));
  });

  test("a 304 for the closed tail chunk carries Stream-Closed too", async () => {
    const s = await bigStream(1000, "closed304");
    assert.equal((await post(s.url, undefined, { type: null, headers: { "stream-closed": "true" } })).status, 204);
    const a = await get(chunkUrl(s.url, s.token, s.first));
    assertChunk(a, { token: s.token, offset: s.first, next: s.tail, marked: true, closed: true, body: s.data }, "closed chunk");
    const r = await get(chunkUrl(s.url, s.token, s.first), { "if-none-match": h(a, "etag") });
    assert.equal(r.status, 304);
    assert.equal(h(r, "stream-closed"), "true");
    assert.equal(h(r, "stream-immutable"), "true");
    assert.equal(h(r, "stream-next-offset"), s.tail);
  });

  test("HEAD answers the GET headers without a body", async () => {
    const s = await bigStream(5 * MiB, "head");
    for (const off of [s.grid[0], s.grid[1]]) {
      const g = await get(chunkUrl(s.url, s.token, off));
      const r = await head(chunkUrl(s.url, s.token, off));
      assert.equal(r.status, 200);
      assert.equal(r.body.length, 0);
      for (const name of ["content-type", "stream-incarnation", "stream-offset", "stream-next-offset", "etag", "stream-immutable", "stream-closed"]) {
        assert.equal(h(r, name), h(g, name), `HEAD ${name}`);
      }
      assertAbsent(r, FORBIDDEN, "HEAD");
    }
  });

  test("the Stream-Incarnation request header has no effect: the path names the token", async () => {
    const s = await bigStream(1000, "hdr");
    const r = await get(chunkUrl(s.url, s.token, s.first), { "stream-incarnation": otherToken(s.token) });
    assertChunk(r, { token: s.token, offset: s.first, next: s.tail, marked: false, body: s.data }, "with another token in the header");
    const x = await get(chunkUrl(s.url, otherToken(s.token), s.first), { "stream-incarnation": s.token });
    assertError(x, 412, "INCARNATION_MISMATCH", { what: "the header does not rescue a wrong path token" });
  });
});

describe("§4.2 chunks of a JSON stream", () => {
  test("application/x-ndjson chunks of the NDJSON bytes; a chunk may end inside a message", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "application/json" });
    const msgs = Array.from({ length: 60 }, (_, i) => JSON.stringify({ i, pad: "y".repeat(100000) }));
    await append(url, `[${msgs.join(",")}]`, "application/json");
    const ndjson = Buffer.from(msgs.map((m) => `${m}\n`).join(""));
    assert.ok(ndjson.length > CHUNK);
    const r0 = await get(chunkUrl(url, c.token, c.tail));
    const o1 = await offsetAfter(url, CHUNK, c.tail);
    assertChunk(r0, { token: c.token, offset: c.tail, next: o1, type: "application/x-ndjson", marked: true, body: ndjson.subarray(0, CHUNK) }, "JSON chunk 0");
    assert.notEqual(ndjson[CHUNK - 1], 0x0a, "this chunk ends inside a message");
    const tail = h(await head(url), "stream-next-offset");
    const r1 = await get(chunkUrl(url, c.token, o1));
    assertChunk(r1, { token: c.token, offset: o1, next: tail, type: "application/x-ndjson", marked: false, body: ndjson.subarray(CHUNK) }, "JSON chunk 1");
  });
});

describe("§4.1 snapshot resources", () => {
  async function withSnap(body = Buffer.from("0123456789ABCDEFGHIJ"), type = "application/x-s; v=2") {
    const url = fresh();
    const c = await createStream(url, { type: OCTET, body: Buffer.from("stream") });
    const d = await publishOk(url, c.tail, body, { type });
    return { url, token: c.token, off: c.tail, digest: d, body, type };
  }

  function assertSnapHeaders(r, s, what) {
    assert.equal(h(r, "content-type"), s.type, `${what}: stored Content-Type`);
    assert.equal(h(r, "stream-incarnation"), s.token, `${what}: Stream-Incarnation`);
    assert.equal(h(r, "stream-snapshot-offset"), s.off, `${what}: Stream-Snapshot-Offset`);
    assert.equal(h(r, "stream-snapshot-digest"), s.digest, `${what}: Stream-Snapshot-Digest`);
    assert.equal(h(r, "stream-next-offset"), s.off, `${what}: Stream-Next-Offset equals the snapshot offset`);
    assert.equal(h(r, "stream-immutable"), "true", `${what}: marked`);
    assert.equal(h(r, "etag"), `"${s.digest}"`, `${what}: the ETag is the quoted digest, as on /snapshot`);
    assertAbsent(r, FORBIDDEN, what);
  }

  test("200: marked, with the stored type, offset, digest, next offset and the same ETag as the plain snapshot read", async () => {
    const s = await withSnap();
    const r = await get(snapUrl(s.url, s.token, s.off));
    assert.equal(r.status, 200);
    assertSnapHeaders(r, s, "200");
    assert.ok(r.body.equals(s.body));
    const plain = await get(`${s.url}/snapshot/${enc(s.off)}`);
    assert.equal(h(plain, "etag"), h(r, "etag"));
    assert.equal(h(plain, "stream-up-to-date"), "true", "the plain read is up to date (the offset is the tail)");
  });

  test("206 for a byte range: marked, Content-Range, same headers; suffix and open-ended ranges", async () => {
    const s = await withSnap();
    for (const [range, first, last] of [["bytes=2-5", 2, 5], ["bytes=15-", 15, 19], ["bytes=-3", 17, 19]]) {
      const r = await get(snapUrl(s.url, s.token, s.off), { range });
      assert.equal(r.status, 206, range);
      assertSnapHeaders(r, s, range);
      assert.equal(h(r, "content-range"), `bytes ${first}-${last}/20`);
      assert.equal(h(r, "accept-ranges"), "bytes");
      assert.ok(r.body.equals(s.body.subarray(first, last + 1)));
    }
    const multi = await get(snapUrl(s.url, s.token, s.off), { range: "bytes=0-1,5-6" });
    assert.equal(multi.status, 200);
    assert.ok(multi.body.equals(s.body));
  });

  test("416 with Content-Range: bytes */total and the current token, before 412", async () => {
    const s = await withSnap();
    for (const t of [s.token, otherToken(s.token)]) {
      const r = await get(snapUrl(s.url, t, s.off), { range: "bytes=20-" });
      assertError(r, 416, "RANGE_NOT_SATISFIABLE", { what: `token ${t === s.token ? "current" : "other"}` });
      assert.equal(h(r, "content-range"), "bytes */20");
      assert.equal(tok(r), s.token);
    }
  });

  test("If-None-Match: 304 with the marker and headers, ignoring a range; another token: 412", async () => {
    const s = await withSnap();
    for (const inm of [`"${s.digest}"`, `W/"${s.digest}"`]) {
      const r = await get(snapUrl(s.url, s.token, s.off), { "if-none-match": inm, range: "bytes=50-" });
      assert.equal(r.status, 304, inm);
      assertSnapHeaders(r, s, `304 ${inm}`);
    }
    const r = await get(snapUrl(s.url, otherToken(s.token), s.off), { "if-none-match": `"${s.digest}"` });
    assertError(r, 412, "INCARNATION_MISMATCH", { what: "304 vs 412" });
    assert.equal(tok(r), s.token);
  });

  test("HEAD answers the GET headers without a body", async () => {
    const s = await withSnap();
    const r = await head(snapUrl(s.url, s.token, s.off));
    assert.equal(r.status, 200);
    assert.equal(r.body.length, 0);
    assertSnapHeaders(r, s, "HEAD");
  });

  test("not the latest visible snapshot: 404 with the current token, before 412 and 416", async () => {
    const s = await withSnap();
    await append(s.url, Buffer.from("more"), OCTET);
    const later = h(await head(s.url), "stream-next-offset");
    await publishOk(s.url, later, "newer");
    for (const [t, hs] of [[s.token, {}], [otherToken(s.token), {}], [otherToken(s.token), { range: "bytes=100-" }]]) {
      const r = await get(snapUrl(s.url, t, s.off), hs);
      assertError(r, 404, "SNAPSHOT_NOT_FOUND", { what: `superseded (${JSON.stringify(hs)})` });
      assert.equal(tok(r), s.token);
    }
    const none = await get(snapUrl(s.url, s.token, await offsetAfter(s.url, 2)));
    assertError(none, 404, "SNAPSHOT_NOT_FOUND", { what: "an offset without a snapshot" });
    assert.equal(tok(none), s.token);
  });

  test("a large (cold-tier) snapshot through the immutable resource, whole and a range", async () => {
    const body = pseudoRandom(3 * MiB, "immut-snap");
    const s = await withSnap(body, OCTET);
    const r = await get(snapUrl(s.url, s.token, s.off));
    assert.equal(r.status, 200);
    assert.equal(sha256(r.body), sha256(body));
    const p = await get(snapUrl(s.url, s.token, s.off), { range: `bytes=${2 * MiB - 1}-${2 * MiB + 1}` });
    assert.equal(p.status, 206);
    assert.ok(p.body.equals(body.subarray(2 * MiB - 1, 2 * MiB + 2)));
  });
});

describe("§4.3 one representation per strong ETag", () => {
  test("no compression: Accept-Encoding changes neither the body, the ETag nor Content-Encoding", async () => {
    const s = await bigStream(CHUNK + 100, "encoding");
    await publishOk(s.url, s.tail, Buffer.alloc(100000, 0x61)); // very compressible
    for (const u of [chunkUrl(s.url, s.token, s.first), snapUrl(s.url, s.token, s.tail)]) {
      const p = new URL(u).pathname;
      const plain = await raw(server.port, `GET ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: identity\r\nConnection: close`, { timeoutMs: 20000 });
      const gz = await raw(server.port, `GET ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip, br, deflate\r\nConnection: close`, { timeoutMs: 20000 });
      assert.equal(plain.status, 200);
      assert.equal(gz.status, 200);
      assert.equal(gz.header("content-encoding"), null, `${p}: no Content-Encoding`);
      assert.equal(gz.header("etag"), plain.header("etag"));
      assert.ok(gz.body.equals(plain.body), `${p}: the same bytes`);
    }
  });
});

describe("§4.1 / §4.3 refusals and their order", () => {
  test("HEAD refusals carry the error Content-Type, no body, and the token where the stream exists", async () => {
    const s = await bigStream(5000, "head-refusals");
    const past = await offsetAfter(s.url, 4000, s.first);
    await publishOk(s.url, past, "snap");
    const ret = await req(`${s.url}/retention/${enc(past)}`, { method: "PUT" });
    assert.ok(ret.status === 200 || ret.status === 204);
    const gone = await head(chunkUrl(s.url, s.token, s.first));
    assertError(gone, 410, undefined, { isHead: true, what: "HEAD below retention" });
    assert.equal(tok(gone), s.token);
    const wrong = await head(chunkUrl(s.url, otherToken(s.token), past));
    assertError(wrong, 412, undefined, { isHead: true, what: "HEAD with another token" });
    assert.equal(tok(wrong), s.token);
    const bad = await head(`${s.url}/incarnation/abc/chunk/${enc(past)}`);
    assertError(bad, 400, undefined, { isHead: true, what: "HEAD malformed token" });
    assert.equal((await del(s.url)).status, 204);
    const missing = await head(chunkUrl(s.url, s.token, past));
    assertError(missing, 404, undefined, { isHead: true, what: "HEAD of a missing stream" });
    assert.equal(tok(missing), null);
  });

  test("a missing stream: 404 without a token, whatever the token and offset", async () => {
    const s = await bigStream(100, "missing");
    assert.equal((await del(s.url)).status, 204);
    for (const u of [chunkUrl(s.url, s.token, s.first), snapUrl(s.url, s.token, s.first)]) {
      const r = await get(u);
      assertError(r, 404, "STREAM_NOT_FOUND", { what: u });
      assert.equal(tok(r), null);
    }
  });

  test("below the retained offset: 410 with the current token, before 412", async () => {
    const s = await bigStream(5 * MiB, "retained");
    await publishOk(s.url, s.grid[1], "snap");
    const ret = await req(`${s.url}/retention/${enc(s.grid[1])}`, { method: "PUT" });
    assert.ok(ret.status === 200 || ret.status === 204, `retention answered ${ret.status}`);
    for (const t of [s.token, otherToken(s.token)]) {
      const r = await get(chunkUrl(s.url, t, s.grid[0]));
      assertError(r, 410, "STREAM_GONE", { what: `chunk below retention, ${t === s.token ? "current" : "other"} token` });
      assert.equal(tok(r), s.token);
    }
    const okr = await get(chunkUrl(s.url, s.token, s.grid[1]));
    assertChunk(okr, { token: s.token, offset: s.grid[1], next: s.tail, marked: false, body: s.data.subarray(CHUNK) }, "chunk at the retained offset");
  });

  test("past the tail: 416 with the current token, before 412 (a recreated, shorter stream)", async () => {
    const s = await bigStream(5000, "old-long");
    const past = await offsetAfter(s.url, 4000, s.first);
    assert.equal((await del(s.url)).status, 204);
    const c = await createStream(s.url, { type: OCTET, body: Buffer.from("short") });
    for (const t of [c.token, s.token]) {
      const r = await get(chunkUrl(s.url, t, past));
      assertError(r, 416, "OFFSET_OUT_OF_RANGE", { what: `chunk past the tail, ${t === c.token ? "current" : "retired"} token` });
      assert.equal(tok(r), c.token);
    }
    // A retired token at an offset the new stream holds: 412 with the new token.
    const r = await get(chunkUrl(s.url, s.token, c.tail));
    assertError(r, 412, "INCARNATION_MISMATCH", { what: "retired token" });
    assert.equal(tok(r), c.token);
    const hr = await head(chunkUrl(s.url, s.token, c.tail));
    assert.equal(hr.status, 412);
    assert.equal(tok(hr), c.token);
    assert.equal(hr.body.length, 0);
  });

  test("a token of the right form that is not the stream's: 412 with the current token", async () => {
    const s = await bigStream(100, "wrong-token");
    for (const t of [otherToken(s.token), String(TWO_52), String(TWO_53 - 1)]) {
      const r = await get(chunkUrl(s.url, t, s.first));
      assertError(r, 412, "INCARNATION_MISMATCH", { what: `token ${t}` });
      assert.equal(tok(r), s.token);
    }
  });

  const queryTest = (what, queries) => test(what, async () => {
    const s = await bigStream(100, "query");
    for (const q of queries) {
      for (const base of [chunkUrl(s.url, s.token, s.first), snapUrl(s.url, s.token, s.first)]) {
        const p = new URL(base).pathname + q;
        const r = await raw(server.port, `GET ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close`);
        assertError(rawAsResponse(r), 400, ["QUERY_NOT_ACCEPTED", "INVALID_QUERY", "INVALID_RESOURCE"], { what: p });
      }
    }
  });
  queryTest("a query component answers 400", ["?x=1", "?offset=-1", "?live=sse", "?x"]);
  // RFC 3986 §3: the query component starts at "?", so a bare "?" is an
  // empty query component, and §6.2.3 keeps it distinct (cache keys differ).
  queryTest("an empty query component (a bare ?) answers 400", ["?"]);

  test("a token not in the issued form answers 400", async () => {
    const s = await bigStream(100, "bad-token");
    const bads = ["abc", "0", "1", "-4503599627370496", `0${s.token}`, `${s.token}x`, String(TWO_53), "4.5e15", "%20"];
    for (const t of bads) {
      for (const u of [chunkUrl(s.url, t, s.first), snapUrl(s.url, t, s.first)]) {
        const r = await get(u);
        assertError(r, 400, ["INVALID_RESOURCE", "INVALID_OFFSET", "INVALID_HEADER"], { what: u });
      }
    }
  });

  test("an offset not in the issued form answers 400 (including the sentinels -1 and now)", async () => {
    const s = await bigStream(100, "bad-offset");
    for (const o of ["garbage", "-1", "now", "x_y", "0"]) {
      for (const u of [`${s.url}/incarnation/${s.token}/chunk/${o}`, `${s.url}/incarnation/${s.token}/snapshot/${o}`]) {
        const r = await get(u);
        assertError(r, 400, ["INVALID_RESOURCE", "INVALID_OFFSET"], { what: u });
      }
    }
  });

  test("GET and HEAD only: other methods are refused", async () => {
    const s = await bigStream(100, "methods");
    await publishOk(s.url, s.tail, "snap");
    for (const u of [chunkUrl(s.url, s.token, s.first), snapUrl(s.url, s.token, s.tail)]) {
      for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
        const r = await req(u, { method, headers: { "content-type": OCTET }, body: method === "DELETE" ? undefined : Buffer.from("x") });
        assertError(r, 405, ["METHOD_NOT_ALLOWED"], { what: `${method} ${u}` });
      }
    }
    // Nothing changed.
    const hd = await head(s.url);
    assert.equal(h(hd, "stream-next-offset"), s.tail);
  });
});
