// Retention.
// Covers extensions.txt §2.2 Retention Effect (PUT {stream}/retention/{offset}:
// alignment to committed data and, for JSON, to message boundaries -> 400;
// not newer than the latest snapshot; forward-only: a boundary at or below
// the current one succeeds and reports the current Stream-Retained-Offset;
// the Stream-Incarnation precondition and token on success; 410 Gone below
// the retained offset afterwards for catch-up, long-poll and SSE reads;
// Ursula retains exactly the requested offset), §2.4 (Stream-Retained-Offset
// on HEAD; 410 of a read carries Stream-Incarnation and comes before the
// precondition), §3 / §3.4 (bootstrap then starts at the snapshot), §11.1
// (the typed answer of a retention advance) and §11 error bodies.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, get, head, openSse, otherToken, post, req } from "./lib/bucket.mjs";
import { parseMultipart, parseMultipartType } from "./lib/multipart.mjs";
import { append, assertAbsent, createStream, enc, h, offsetAfter, publishOk, tok, stopAndRemove } from "./lib/snap.mjs";

const server = new Server();
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;
const fresh = () => `${server.url}/retain/s${++n}`;
const OCTET = "application/octet-stream";

const retain = (url, offset, headers = {}) => req(`${url}/retention/${enc(offset)}`, { method: "PUT", headers });

function assertRetained(r, offset, token, what = "retention") {
  assert.ok(r.status === 200 || r.status === 204, `${what} answered ${r.status} ${r.text}`);
  assert.equal(h(r, "stream-retained-offset"), offset, `${what}: Stream-Retained-Offset`);
  assert.equal(tok(r), token, `${what}: Stream-Incarnation`);
}

async function retainedOnHead(url) {
  const r = await head(url);
  assert.equal(r.status, 200);
  return h(r, "stream-retained-offset");
}

// A binary stream "0123456789abcdefghij" with offsets after 5, 10 and 15
// bytes, and a snapshot at `snapAt` (a key of offs) unless null.
async function binary(snapAt = "o10") {
  const url = fresh();
  const c = await createStream(url, { type: OCTET });
  const tail = await append(url, Buffer.from("0123456789abcdefghij"), OCTET);
  const offs = { first: c.tail, o5: await offsetAfter(url, 5), o10: await offsetAfter(url, 10), o15: await offsetAfter(url, 15), tail };
  if (snapAt) await publishOk(url, offs[snapAt], `snapshot-at-${snapAt}`);
  return { url, token: c.token, offs };
}

describe("§2.2 retention: advancing", () => {
  test("at the latest snapshot's offset: success reporting exactly that offset and the token; HEAD reports it", async () => {
    const { url, token, offs } = await binary("o10");
    assertRetained(await retain(url, offs.o10), offs.o10, token);
    assert.equal(await retainedOnHead(url), offs.o10);
  });

  test("below the latest snapshot's offset: success, exactly as requested", async () => {
    const { url, token, offs } = await binary("o15");
    assertRetained(await retain(url, offs.o5), offs.o5, token);
    assert.equal(await retainedOnHead(url), offs.o5);
    assertRetained(await retain(url, offs.o15), offs.o15, token, "a later advance");
    assert.equal(await retainedOnHead(url), offs.o15);
  });

  test("forward only: a lower or equal boundary succeeds, changes nothing and reports the current offset", async () => {
    const { url, token, offs } = await binary("o15");
    assertRetained(await retain(url, offs.o10), offs.o10, token);
    assertRetained(await retain(url, offs.o10), offs.o10, token, "an equal boundary (repeat)");
    assertRetained(await retain(url, offs.o5), offs.o10, token, "a lower boundary");
    assertRetained(await retain(url, offs.first), offs.o10, token, "the first offset");
    assert.equal(await retainedOnHead(url), offs.o10);
    const r = await get(`${url}?offset=${enc(offs.o5)}`);
    assertError(r, 410, "STREAM_GONE", { what: "a read below the retained offset after the lower request" });
  });

  test("the stream's first offset, with a snapshot: success, nothing changes", async () => {
    const { url, token, offs } = await binary("o5");
    assertRetained(await retain(url, offs.first), offs.first, token);
    const r = await get(`${url}?offset=${enc(offs.first)}`);
    assert.equal(r.status, 200);
    assert.equal(r.text, "0123456789abcdefghij");
  });

  test("a snapshot at the tail allows retention of everything", async () => {
    const { url, token, offs } = await binary("tail");
    assertRetained(await retain(url, offs.tail), offs.tail, token);
    const r = await get(`${url}?offset=${enc(offs.tail)}`);
    assert.equal(r.status, 200);
    assert.equal(r.body.length, 0);
    assert.equal(h(r, "stream-up-to-date"), "true");
  });

  test("a JSON stream accepts a message boundary", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "application/json" });
    await append(url, '[{"a":1},{"b":2},{"c":3}]', "application/json");
    const afterTwo = await offsetAfter(url, 16, c.tail);
    await publishOk(url, afterTwo, "json-snap");
    assertRetained(await retain(url, afterTwo), afterTwo, c.token);
    const r = await get(`${url}?offset=${enc(afterTwo)}`);
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"c":3}\n');
  });

  test("a closed stream can be retained", async () => {
    const { url, token, offs } = await binary("o10");
    assert.equal((await post(url, undefined, { type: null, headers: { "stream-closed": "true" } })).status, 204);
    assertRetained(await retain(url, offs.o10), offs.o10, token);
  });
});

describe("§2.2 retention: refusals", () => {
  test("newer than the latest snapshot: refused, nothing changes", async () => {
    const { url, offs } = await binary("o5");
    for (const [what, off] of [["after the snapshot", offs.o10], ["the tail", offs.tail]]) {
      const r = await retain(url, off);
      assert.ok(r.status === 400 || r.status === 409, `${what}: answered ${r.status} ${r.text}`);
      assertError(r, r.status, undefined, { what });
      assert.equal(await retainedOnHead(url), offs.first, `${what}: retention did not move`);
    }
  });

  test("without any snapshot: refused", async () => {
    const { url, offs } = await binary(null);
    const r = await retain(url, offs.o5);
    assert.ok(r.status === 400 || r.status === 409, `answered ${r.status} ${r.text}`);
    assertError(r, r.status, undefined, { what: "retention without a snapshot" });
    assert.equal(await retainedOnHead(url), offs.first);
    assert.equal((await get(`${url}?offset=${enc(offs.first)}`)).status, 200);
  });

  test("a JSON offset inside a message: 400, nothing changes", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "application/json" });
    await append(url, '[{"a":1},{"b":2},{"c":3}]', "application/json");
    const tail = h(await head(url), "stream-next-offset");
    await publishOk(url, tail, "json-snap");
    for (const k of [1, 4, 9, 20]) {
      const inside = await offsetAfter(url, k, c.tail);
      const r = await retain(url, inside);
      assertError(r, 400, ["NOT_JSON_BOUNDARY", "INVALID_RETENTION"], { what: `${k} bytes into the NDJSON view` });
    }
    assert.equal(await retainedOnHead(url), c.tail);
  });

  test("past the tail: refused", async () => {
    const longer = await binary(null);
    const url = fresh();
    const c = await createStream(url, { type: OCTET, body: Buffer.from("ab") });
    await publishOk(url, c.tail, "s");
    const first = await retainedOnHead(url);
    const r = await retain(url, longer.offs.tail);
    assert.ok(r.status >= 400 && r.status < 500, `answered ${r.status} ${r.text}`);
    assertError(r, r.status, undefined, { what: "retention past the tail" });
    assert.equal(await retainedOnHead(url), first);
  });

  test("a malformed offset: 400", async () => {
    const { url } = await binary("o5");
    for (const bad of ["garbage", "x_y"]) {
      const r = await retain(url, bad);
      assertError(r, 400, ["INVALID_OFFSET", "INVALID_RETENTION"], { what: `offset ${bad}` });
    }
  });

  test("a missing stream: 404 without a token", async () => {
    const { url, offs } = await binary("o5");
    const r = await retain(`${url}-missing`, offs.o5);
    assertError(r, 404, "STREAM_NOT_FOUND", { what: "missing stream" });
    assert.equal(tok(r), null);
  });

  test("Stream-Incarnation precondition: mismatch 412 with the current token and no change; match succeeds; malformed 400", async () => {
    const { url, token, offs } = await binary("o10");
    const bad = await retain(url, offs.o10, { "stream-incarnation": otherToken(token) });
    assertError(bad, 412, "INCARNATION_MISMATCH", { what: "retention with another token" });
    assert.equal(tok(bad), token);
    assert.equal(await retainedOnHead(url), offs.first);
    assertError(await retain(url, offs.o10, { "stream-incarnation": "0" }), 400, undefined, { what: "malformed token" });
    assertRetained(await retain(url, offs.o10, { "stream-incarnation": token }), offs.o10, token, "matching token");
  });
});

describe("§2.2 retention: reads below it answer 410", () => {
  test("catch-up reads below: 410 STREAM_GONE with Stream-Incarnation; at and above: the bytes", async () => {
    const { url, token, offs } = await binary("o10");
    assertRetained(await retain(url, offs.o10), offs.o10, token);
    for (const [what, off] of [["first", offs.first], ["o5", offs.o5]]) {
      const r = await get(`${url}?offset=${enc(off)}`);
      assertError(r, 410, "STREAM_GONE", { what: `catch-up at ${what}` });
      assert.equal(tok(r), token, `${what}: the 410 carries Stream-Incarnation`);
    }
    const at = await get(`${url}?offset=${enc(offs.o10)}`);
    assert.equal(at.status, 200);
    assert.equal(at.text, "abcdefghij");
    const above = await get(`${url}?offset=${enc(offs.o15)}`);
    assert.equal(above.text, "fghij");
  });

  test("a read from the stream's beginning (offset=-1, or no offset) answers 410 once retention advanced", async () => {
    // §3.4: "If a server has begun returning 410 Gone for a stream (i.e.,
    // earliest retained offset > -1)": -1 names bytes that are gone.
    const { url, token, offs } = await binary("o10");
    assertRetained(await retain(url, offs.o10), offs.o10, token);
    for (const q of ["?offset=-1", ""]) {
      const r = await get(`${url}${q}`);
      assertError(r, 410, "STREAM_GONE", { what: `GET ${q || "without offset"}` });
      assert.equal(tok(r), token);
    }
  });

  test("410 comes before the precondition: a read below with another token answers 410", async () => {
    const { url, token, offs } = await binary("o10");
    assertRetained(await retain(url, offs.o10), offs.o10, token);
    const r = await get(`${url}?offset=${enc(offs.o5)}`, { "stream-incarnation": otherToken(token) });
    assertError(r, 410, "STREAM_GONE", { what: "410 vs 412" });
    assert.equal(tok(r), token);
  });

  test("a long-poll below: 410 with Stream-Incarnation, at once", async () => {
    const { url, token, offs } = await binary("o10");
    assertRetained(await retain(url, offs.o10), offs.o10, token);
    const t0 = performance.now();
    const r = await get(`${url}?offset=${enc(offs.o5)}&live=long-poll&timeout_ms=5000`);
    assertError(r, 410, "STREAM_GONE", { what: "long-poll below" });
    assert.equal(tok(r), token);
    assert.ok(performance.now() - t0 < 4000, "the 410 does not wait for the long-poll timeout");
  });

  test("an SSE read below: 410 with Stream-Incarnation", async () => {
    const { url, token, offs } = await binary("o10");
    assertRetained(await retain(url, offs.o10), offs.o10, token);
    const sse = await openSse(`${url}?offset=${enc(offs.first)}&live=sse`, { timeoutMs: 5000 });
    sse.close();
    assert.equal(sse.status, 410, `SSE below answered ${sse.status}`);
    assertError({ status: sse.status, headers: sse.res.headers, body: Buffer.from(sse.text), text: sse.text }, 410, "STREAM_GONE", { what: "SSE below" });
    assert.equal(tok(sse.res), token);
  });

  test("SSE and long-poll at the retained offset still work", async () => {
    const { url, token, offs } = await binary("o10");
    assertRetained(await retain(url, offs.o10), offs.o10, token);
    const lp = await get(`${url}?offset=${enc(offs.o10)}&live=long-poll&timeout_ms=100`);
    assert.equal(lp.status, 200);
    assert.equal(lp.text, "abcdefghij");
    const sse = await openSse(`${url}?offset=${enc(offs.o10)}&live=sse`, { timeoutMs: 5000 });
    try {
      assert.equal(sse.status, 200);
      assert.ok(await sse.waitFor((ev) => ev.some((e) => e.type === "control")), "a control event arrives");
    } finally {
      sse.close();
    }
  });
});

describe("§3 / §3.4 bootstrap after retention", () => {
  test("bootstrap starts at the snapshot: its part first, then the bytes from its offset", async () => {
    const { url, token, offs } = await binary("o10");
    assertRetained(await retain(url, offs.o5), offs.o5, token);
    const r = await get(`${url}/bootstrap`);
    assert.equal(r.status, 200);
    assert.equal(h(r, "stream-snapshot-offset"), offs.o10);
    assert.equal(h(r, "stream-next-offset"), offs.tail);
    assert.equal(h(r, "stream-up-to-date"), "true");
    const { boundary } = parseMultipartType(h(r, "content-type"));
    const { parts } = parseMultipart(r.body, boundary);
    assert.equal(parts[0].body.toString(), "snapshot-at-o10");
    assert.equal(Buffer.concat(parts.slice(1).map((p) => p.body)).toString(), "abcdefghij");
  });

  test("with retention at the snapshot: the bootstrap covers the retained offset", async () => {
    const { url, token, offs } = await binary("o15");
    assertRetained(await retain(url, offs.o15), offs.o15, token);
    const r = await get(`${url}/bootstrap`);
    assert.equal(r.status, 200);
    assert.equal(h(r, "stream-snapshot-offset"), offs.o15);
    const { parts } = parseMultipart(r.body, parseMultipartType(h(r, "content-type")).boundary);
    assert.equal(parts[0].body.toString(), "snapshot-at-o15");
    assert.equal(Buffer.concat(parts.slice(1).map((p) => p.body)).toString(), "fghij");
    assertAbsent(r, ["stream-cursor"], "bootstrap");
  });
});
