// Snapshots: reading a snapshot.
// Covers extensions.txt §2.5 Read Snapshot (the response headers, ETag as
// the quoted digest, If-None-Match and 304 with the same headers, Byte
// Ranges: Accept-Ranges, 206 + Content-Range for bytes=first-last, first-
// and -suffix, 416 with Content-Range: bytes */total for a range starting at
// or past the end, several ranges / an unparseable range / If-Range -> the
// whole body as 200, the order 404 and 410, then 416, then 412, then 304,
// the same Stream-* headers and digest on a 206, Stream-Up-To-Date only when
// the snapshot offset is the tail), §2.4 Stream-Incarnation on snapshot
// reads (on 200, on 416 and 410, on the 404 of an existing stream; the
// precondition), §3.4 (stream reads ignore Range) and §11 error bodies.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, del, get, head, otherToken, req } from "./lib/bucket.mjs";
import {
  MiB, append, assertAbsent, createStream, enc, h, offsetAfter, publishOk, pseudoRandom, sha256, tok, stopAndRemove,
} from "./lib/snap.mjs";

const server = new Server();
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;
const fresh = () => `${server.url}/snapread/s${++n}`;
const OCTET = "application/octet-stream";
const TYPE = "application/x-snap; v=1";
const BODY = Buffer.from("0123456789ABCDEFGHIJ"); // 20 bytes

// A stream "stream-bytes-here" with a snapshot BODY at its tail.
async function withSnapshot({ body = BODY, type = TYPE, atTail = true } = {}) {
  const url = fresh();
  const c = await createStream(url, { type: OCTET, body: Buffer.from("stream-bytes-here") });
  const off = atTail ? c.tail : await offsetAfter(url, 6);
  const digest = await publishOk(url, off, body, { type });
  return { url, token: c.token, off, digest, tail: c.tail, body, type, snap: `${url}/snapshot/${enc(off)}` };
}

const SAME = ["stream-snapshot-offset", "stream-snapshot-digest", "stream-next-offset", "stream-incarnation", "etag"];

function assertWholeHeaders(r, s, what) {
  assert.equal(h(r, "content-type"), s.type, `${what}: the stored Content-Type`);
  assert.equal(h(r, "stream-snapshot-offset"), s.off, `${what}: Stream-Snapshot-Offset`);
  assert.equal(h(r, "stream-snapshot-digest"), s.digest, `${what}: Stream-Snapshot-Digest`);
  assert.equal(h(r, "stream-next-offset"), s.off, `${what}: Stream-Next-Offset is the offset after the snapshot`);
  assert.equal(h(r, "stream-incarnation"), s.token, `${what}: Stream-Incarnation`);
  assert.equal(h(r, "etag"), `"${s.digest}"`, `${what}: ETag is the quoted digest (a strong tag)`);
  assert.equal(h(r, "accept-ranges"), "bytes", `${what}: Accept-Ranges: bytes on every snapshot answer`);
}

describe("§2.5 the whole snapshot", () => {
  test("200 with the stored type, offset, digest, next offset, token, strong ETag, Accept-Ranges", async () => {
    const s = await withSnapshot();
    const r = await get(s.snap);
    assert.equal(r.status, 200);
    assertWholeHeaders(r, s, "200");
    assert.deepEqual(r.body, BODY);
    assert.equal(h(r, "content-range"), null);
  });

  test("Stream-Up-To-Date: true only while the snapshot offset is the tail", async () => {
    const s = await withSnapshot();
    const r1 = await get(s.snap);
    assert.equal(h(r1, "stream-up-to-date"), "true", "the snapshot offset is the tail");
    await append(s.url, "more", OCTET);
    const r2 = await get(s.snap);
    assert.equal(r2.status, 200);
    assert.equal(h(r2, "stream-up-to-date"), null, "an update follows the snapshot");
    const mid = await withSnapshot({ atTail: false });
    assert.equal(h(await get(mid.snap), "stream-up-to-date"), null, "a snapshot below the tail");
    // A range answer says the same.
    const rr = await get(s.snap, { range: "bytes=0-0" });
    assert.equal(rr.status, 206);
    assert.equal(h(rr, "stream-up-to-date"), null);
  });

  test("the ETag and body are stable across requests", async () => {
    const s = await withSnapshot();
    const a = await get(s.snap);
    const b = await get(s.snap);
    assert.equal(h(a, "etag"), h(b, "etag"));
    assert.deepEqual(a.body, b.body);
  });

  test("a snapshot offset that holds no snapshot: 404 SNAPSHOT_NOT_FOUND with Stream-Incarnation", async () => {
    const s = await withSnapshot();
    const other = await offsetAfter(s.url, 3);
    const r = await get(`${s.url}/snapshot/${enc(other)}`);
    assertError(r, 404, "SNAPSHOT_NOT_FOUND", { what: "no snapshot there" });
    assert.equal(tok(r), s.token);
    const url = fresh();
    const c = await createStream(url, { type: OCTET, body: Buffer.from("x") });
    const none = await get(`${url}/snapshot/${enc(c.tail)}`);
    assertError(none, 404, "SNAPSHOT_NOT_FOUND", { what: "a stream without snapshots" });
    assert.equal(tok(none), c.token);
  });

  test("a missing stream: 404 without Stream-Incarnation", async () => {
    const s = await withSnapshot();
    assert.equal((await del(s.url)).status, 204);
    const r = await get(s.snap);
    assertError(r, 404, "STREAM_NOT_FOUND", { what: "deleted stream" });
    assert.equal(tok(r), null);
  });

  test("a malformed offset: 400", async () => {
    const s = await withSnapshot();
    const r = await get(`${s.url}/snapshot/garbage`);
    assertError(r, 400, ["INVALID_OFFSET", "INVALID_SNAPSHOT"], { what: "malformed snapshot offset" });
  });

  test("Stream-Incarnation precondition: a match reads, a mismatch is 412 with the current token, malformed is 400", async () => {
    const s = await withSnapshot();
    const ok = await get(s.snap, { "stream-incarnation": s.token });
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.body, BODY);
    const bad = await get(s.snap, { "stream-incarnation": otherToken(s.token) });
    assertError(bad, 412, "INCARNATION_MISMATCH", { what: "snapshot read with another token" });
    assert.equal(tok(bad), s.token);
    const malformed = await get(s.snap, { "stream-incarnation": "12abc" });
    assertError(malformed, 400, undefined, { what: "malformed token" });
  });

  test("a cold-tier snapshot (5 MiB) reads back whole and in ranges", async () => {
    const body = pseudoRandom(5 * MiB + 17, "cold-read");
    const s = await withSnapshot({ body, type: OCTET });
    const r = await get(s.snap);
    assert.equal(r.status, 200);
    assert.equal(r.body.length, body.length);
    assert.equal(sha256(r.body), sha256(body));
    for (const [first, last] of [[0, 55], [MiB - 3, MiB + 3], [3 * MiB, 4 * MiB + 9], [body.length - 10, body.length - 1]]) {
      const p = await get(s.snap, { range: `bytes=${first}-${last}` });
      assert.equal(p.status, 206, `bytes=${first}-${last}`);
      assert.equal(h(p, "content-range"), `bytes ${first}-${last}/${body.length}`);
      assert.deepEqual(p.body, body.subarray(first, last + 1));
    }
  });
});

describe("§2.5 If-None-Match", () => {
  test("the ETag (strong or weakened) answers 304 with the same headers and no body", async () => {
    const s = await withSnapshot();
    const whole = await get(s.snap);
    for (const inm of [`"${s.digest}"`, `W/"${s.digest}"`, `"other", "${s.digest}"`]) {
      const r = await get(s.snap, { "if-none-match": inm });
      assert.equal(r.status, 304, `If-None-Match: ${inm}`);
      assert.equal(r.body.length, 0);
      for (const name of [...SAME, "content-type", "stream-up-to-date"]) {
        assert.equal(h(r, name), h(whole, name), `If-None-Match: ${inm}: ${name} as on the 200`);
      }
    }
  });

  test("a tag that is not the snapshot's answers 200 with the body", async () => {
    const s = await withSnapshot();
    for (const inm of ['"nope"', `"${s.digest.slice(1)}"`]) {
      const r = await get(s.snap, { "if-none-match": inm });
      assert.equal(r.status, 200, `If-None-Match: ${inm}`);
      assert.deepEqual(r.body, BODY);
    }
  });

  test("If-None-Match ignores any byte range: 304, never 206 or 416", async () => {
    const s = await withSnapshot();
    for (const range of ["bytes=0-3", "bytes=100-", "bytes=20-"]) {
      const r = await get(s.snap, { "if-none-match": `"${s.digest}"`, range });
      assert.equal(r.status, 304, `Range: ${range} with a matching If-None-Match`);
      assert.equal(h(r, "content-range"), null);
      assert.equal(h(r, "etag"), `"${s.digest}"`);
    }
  });
});

describe("§2.5 byte ranges", () => {
  const cases = [
    ["bytes=0-3", 0, 3],
    ["bytes=5-9", 5, 9],
    ["bytes=19-19", 19, 19],
    ["bytes=2-1000", 2, 19], // last past the end: the end
    ["bytes=7-", 7, 19],
    ["bytes=0-", 0, 19],
    ["bytes=-4", 16, 19],
    ["bytes=-1", 19, 19],
    ["bytes=-20", 0, 19],
    ["bytes=-500", 0, 19], // a suffix longer than the body: the whole body
  ];
  for (const [range, first, last] of cases) {
    test(`${range}: 206 with Content-Range bytes ${first}-${last}/20 and the same Stream-* headers`, async () => {
      const s = await withSnapshot();
      const whole = await get(s.snap);
      const r = await get(s.snap, { range });
      assert.equal(r.status, 206, `${range} answered ${r.status} ${r.text}`);
      assert.equal(h(r, "content-range"), `bytes ${first}-${last}/20`);
      assert.deepEqual(r.body, BODY.subarray(first, last + 1));
      assert.equal(Number(h(r, "content-length")), last - first + 1);
      assert.equal(h(r, "content-type"), TYPE);
      assert.equal(h(r, "accept-ranges"), "bytes");
      for (const name of SAME) assert.equal(h(r, name), h(whole, name), `${range}: ${name} as for the whole body`);
      assert.equal(h(r, "stream-snapshot-digest"), s.digest, "the digest covers the whole snapshot");
    });
  }

  for (const range of ["bytes=20-", "bytes=20-25", "bytes=21-30", "bytes=1000-2000"]) {
    test(`${range}: 416 with Content-Range: bytes */20 and Stream-Incarnation`, async () => {
      const s = await withSnapshot();
      const r = await get(s.snap, { range });
      assertError(r, 416, "RANGE_NOT_SATISFIABLE", { what: range });
      assert.equal(h(r, "content-range"), "bytes */20");
      assert.equal(tok(r), s.token, "a 416 of a read carries Stream-Incarnation");
    });
  }

  // RFC 9110 §14.1.1: "A suffix-range is satisfiable if the suffix-length
  // is greater than zero." bytes=-0 is a valid range that selects nothing,
  // starting at the end of the snapshot: §2.5 makes that a 416.
  test("bytes=-0 (a valid, empty suffix starting at the end): 416 with Content-Range: bytes */20", async () => {
    const s = await withSnapshot();
    const r = await get(s.snap, { range: "bytes=-0" });
    assertError(r, 416, "RANGE_NOT_SATISFIABLE", { what: "bytes=-0" });
    assert.equal(h(r, "content-range"), "bytes */20");
    assert.equal(tok(r), s.token);
  });

  test("an empty snapshot: any bytes=N- range is 416 bytes */0", async () => {
    const s = await withSnapshot({ body: Buffer.alloc(0) });
    const r = await get(s.snap, { range: "bytes=0-" });
    assertError(r, 416, "RANGE_NOT_SATISFIABLE", { what: "bytes=0- of an empty snapshot" });
    assert.equal(h(r, "content-range"), "bytes */0");
  });

  for (const range of ["bytes=0-1,4-5", "bytes=0-1, 3-", "bytes=-2,0-0"]) {
    test(`several ranges (${range}) answer the whole snapshot as 200`, async () => {
      const s = await withSnapshot();
      const r = await get(s.snap, { range });
      assert.equal(r.status, 200, `${range} answered ${r.status}`);
      assert.deepEqual(r.body, BODY);
      assert.equal(h(r, "content-range"), null);
      assert.equal(h(r, "etag"), `"${s.digest}"`);
    });
  }

  for (const range of ["bytes=abc", "items=0-3", "bytes=5-2", "bytes 0-3", "bytes=", "bytes=--3"]) {
    test(`an unparseable range (${range}) answers the whole snapshot as 200`, async () => {
      const s = await withSnapshot();
      const r = await get(s.snap, { range });
      assert.equal(r.status, 200, `${range} answered ${r.status}`);
      assert.deepEqual(r.body, BODY);
    });
  }

  for (const ifRange of [null, '"something-else"', "Wed, 21 Oct 2015 07:28:00 GMT"]) {
    test(`If-Range (${ifRange ?? "the ETag"}) with a range answers the whole snapshot as 200`, async () => {
      const s = await withSnapshot();
      const r = await get(s.snap, { range: "bytes=0-3", "if-range": ifRange ?? `"${s.digest}"` });
      assert.equal(r.status, 200, `If-Range answered ${r.status}`);
      assert.deepEqual(r.body, BODY);
      assert.equal(h(r, "content-range"), null);
    });
  }
});

describe("§2.5 order: 404 and 410, then 416, then 412, then 304", () => {
  test("404 (not the latest) before 416, 412 and 304, with Stream-Incarnation", async () => {
    const s = await withSnapshot({ atTail: false });
    // Supersede it: s.off is no longer the latest.
    await append(s.url, "more", OCTET);
    const later = (await head(s.url)).headers.get("stream-next-offset");
    await publishOk(s.url, later, "newer");
    const combos = [
      {},
      { range: "bytes=100-" },
      { "stream-incarnation": otherToken(s.token) },
      { "if-none-match": `"${s.digest}"` },
      { range: "bytes=100-", "stream-incarnation": otherToken(s.token), "if-none-match": `"${s.digest}"` },
    ];
    for (const hs of combos) {
      const r = await get(s.snap, hs);
      assertError(r, 404, "SNAPSHOT_NOT_FOUND", { what: JSON.stringify(hs) });
      assert.equal(tok(r), s.token, `${JSON.stringify(hs)}: the 404 carries Stream-Incarnation`);
    }
  });

  test("below the retained offset: 404 or 410 before 416, 412 and 304, with Stream-Incarnation", async () => {
    const s = await withSnapshot({ atTail: false });
    const later = (await head(s.url)).headers.get("stream-next-offset");
    await publishOk(s.url, later, "newer");
    const ret = await req(`${s.url}/retention/${enc(later)}`, { method: "PUT" });
    assert.ok(ret.status === 200 || ret.status === 204, `retention answered ${ret.status} ${ret.text}`);
    for (const hs of [{}, { range: "bytes=100-", "stream-incarnation": otherToken(s.token), "if-none-match": `"${s.digest}"` }]) {
      const r = await get(s.snap, hs);
      assert.ok(r.status === 404 || r.status === 410, `${JSON.stringify(hs)} answered ${r.status}`);
      assertError(r, r.status, r.status === 404 ? "SNAPSHOT_NOT_FOUND" : "STREAM_GONE", { what: JSON.stringify(hs) });
      assert.equal(tok(r), s.token);
    }
  });

  test("416 before 412: an unsatisfiable range with another token answers 416 with the current token", async () => {
    const s = await withSnapshot();
    const r = await get(s.snap, { range: "bytes=50-", "stream-incarnation": otherToken(s.token) });
    assertError(r, 416, "RANGE_NOT_SATISFIABLE", { what: "416 vs 412" });
    assert.equal(h(r, "content-range"), "bytes */20");
    assert.equal(tok(r), s.token);
  });

  test("412 before 304: a matching If-None-Match with another token answers 412", async () => {
    const s = await withSnapshot();
    const r = await get(s.snap, { "if-none-match": `"${s.digest}"`, "stream-incarnation": otherToken(s.token) });
    assertError(r, 412, "INCARNATION_MISMATCH", { what: "412 vs 304" });
    assert.equal(tok(r), s.token);
  });

  test("If-None-Match with an unsatisfiable range and another token: 412, never 416", async () => {
    const s = await withSnapshot();
    const r = await get(s.snap, { "if-none-match": `"${s.digest}"`, range: "bytes=50-", "stream-incarnation": otherToken(s.token) });
    assertError(r, 412, "INCARNATION_MISMATCH", { what: "INM + range + token" });
  });

  test("a satisfiable range with another token: 412", async () => {
    const s = await withSnapshot();
    const r = await get(s.snap, { range: "bytes=0-3", "stream-incarnation": otherToken(s.token) });
    assertError(r, 412, "INCARNATION_MISMATCH", { what: "range + token" });
  });
});

describe("§2.5 stream reads ignore Range", () => {
  test("a catch-up read with a Range header returns the stream's bytes from the offset as 200", async () => {
    const s = await withSnapshot();
    const first = (await head(s.url)).headers.get("stream-retained-offset");
    const r = await get(`${s.url}?offset=${enc(first)}`, { range: "bytes=0-3" });
    assert.equal(r.status, 200);
    assert.equal(r.text, "stream-bytes-here");
    assert.equal(h(r, "content-range"), null);
    assertAbsent(r, ["stream-snapshot-offset", "stream-snapshot-digest"], "a stream read");
  });
});
