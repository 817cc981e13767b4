// Bucket surface: stream incarnation and retained offset.
// Covers extensions.txt §2.4 (only Stream-Incarnation and
// Stream-Retained-Offset; snapshots, retention advances and history
// rewrites are not tested here): the token on every successful answer and
// on the 416 of a catch-up, long-poll and SSE read past the tail (with a
// precondition naming another token too: 416 comes before 412), its
// form, its change on delete+recreate, its stability across restarts, the
// request precondition (match, 412 INCARNATION_MISMATCH, 404 before 412, the
// PUT exception, malformed and repeated values), live reads ending when the
// stream goes away (long-poll 404, SSE error event, §11), and
// Stream-Retained-Offset on every successful HEAD.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import {
  assertError, assertToken, del, get, head, openSse, otherToken, post, put, raw, rawAsResponse, req, sleep,
} from "./lib/bucket.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

let n = 0;
const fresh = () => `${server.url}/incb/s${++n}`;
async function create(url, body = "abc", type = "text/plain") {
  const r = await put(url, { type, body });
  assert.equal(r.status, 201, `create answered ${r.status} ${r.text}`);
  return assertToken(r.headers.get("stream-incarnation"), "Stream-Incarnation on 201");
}
const tok = (r) => r.headers.get("stream-incarnation");
const close = (url, headers = {}) => post(url, undefined, { type: null, headers: { "stream-closed": "true", ...headers } });

describe("Stream-Incarnation on responses", () => {
  test("every successful answer about a stream carries the same token, in [2^52, 2^53)", async () => {
    const url = fresh();
    const t = await create(url, "hello");
    const seen = {};
    const again = await put(url, { body: "hello" });
    assert.equal(again.status, 200);
    seen["200 create"] = tok(again);
    const ap = await post(url, " world");
    assert.equal(ap.status, 204);
    seen["append"] = tok(ap);
    const h = await head(url);
    assert.equal(h.status, 200);
    seen["HEAD"] = tok(h);
    const g = await get(`${url}?offset=-1`);
    assert.equal(g.status, 200);
    seen["catch-up"] = tok(g);
    const tail = g.headers.get("stream-next-offset");
    const atTail = await get(`${url}?offset=${tail}`);
    assert.equal(atTail.status, 200);
    seen["catch-up at the tail"] = tok(atTail);
    const lp204 = await get(`${url}?offset=${tail}&live=long-poll&timeout_ms=50`);
    assert.equal(lp204.status, 204);
    seen["long-poll 204"] = tok(lp204);
    const lp200 = await get(`${url}?offset=-1&live=long-poll&timeout_ms=50`);
    assert.equal(lp200.status, 200);
    seen["long-poll 200"] = tok(lp200);
    const sse = await openSse(`${url}?offset=-1&live=sse`);
    sse.close();
    assert.equal(sse.status, 200);
    seen["SSE"] = tok(sse.res);
    const cl = await close(url);
    assert.equal(cl.status, 204);
    seen["close"] = tok(cl);
    const h2 = await head(url);
    seen["HEAD of the closed stream"] = tok(h2);
    for (const [what, v] of Object.entries(seen)) {
      assertToken(v, `Stream-Incarnation on ${what}`);
      assert.equal(v, t, `Stream-Incarnation on ${what} is the stream's token`);
    }
  });

  test("a stream created closed, and a JSON stream, carry it too", async () => {
    const url = fresh();
    const r = await put(url, { body: "x", headers: { "stream-closed": "true" } });
    assert.equal(r.status, 201);
    const t = assertToken(tok(r));
    const r2 = await put(url, { body: "x", headers: { "stream-closed": "true" } });
    assert.equal(r2.status, 200);
    assert.equal(tok(r2), t);
    const j = fresh();
    const tj = await create(j, '{"a":1}', "application/json");
    assert.equal(tok(await post(j, "[1,2]", { type: "application/json" })), tj);
    assert.equal(tok(await get(`${j}?offset=-1`)), tj);
  });

  test("a read past the tail answers 416 with the token: catch-up, long-poll, SSE; before 412", async () => {
    const url = fresh();
    const t = await create(url, "abc");
    const past = "0000000000000000_0000000000000009";
    for (const live of ["", "&live=long-poll&timeout_ms=100", "&live=sse"]) {
      for (const precondition of [{}, { "stream-incarnation": otherToken(t) }]) {
        const what = `offset past the tail${live || " (catch-up)"}${precondition["stream-incarnation"] ? ", another token sent" : ""}`;
        const r = await get(`${url}?offset=${past}${live}`, precondition);
        assertError(r, 416, "OFFSET_OUT_OF_RANGE", { what });
        assert.equal(tok(r), t, `Stream-Incarnation on the 416: ${what}`);
      }
    }
  });

  test("a missing stream's 404 carries no token", async () => {
    await create(fresh()); // the bucket holds a stream; this one is missing
    const missing = `${server.url}/incb/missing${n}`;
    for (const r of [await head(missing), await get(`${missing}?offset=-1`), await post(missing, "x"), await del(missing)]) {
      assert.equal(r.status, 404);
      assert.equal(tok(r), null);
    }
  });

  test("the token changes when the stream is deleted and recreated", async () => {
    const url = fresh();
    const t1 = await create(url);
    assert.equal((await del(url)).status, 204);
    const t2 = await create(url);
    assert.notEqual(t2, t1);
    assert.equal((await del(url)).status, 204);
    const t3 = await create(url);
    assert.notEqual(t3, t1);
    assert.notEqual(t3, t2);
    assert.equal(tok(await head(url)), t3);
  });

  test("appends and closes do not change the token", async () => {
    const url = fresh();
    const t = await create(url);
    for (let i = 0; i < 20; i++) assert.equal(tok(await post(url, `m${i}`)), t);
    assert.equal(tok(await close(url)), t);
    assert.equal(tok(await head(url)), t);
  });
});

describe("Stream-Incarnation across restarts", () => {
  for (const signal of ["SIGTERM", "SIGKILL"]) {
    test(`the token is stable across a ${signal} restart`, async () => {
      const a = fresh(), b = fresh(), c = fresh();
      const ta = await create(a, "aaa");
      await post(a, "more");
      const tj = await create(b, '{"x":1}', "application/json");
      // c is recreated: its current token must survive, not the old one.
      const cOld = await create(c);
      assert.equal((await del(c)).status, 204);
      const tc = await create(c, "new");
      assert.notEqual(tc, cOld);
      const names = [a, b, c].map((u) => u.slice(server.url.length));
      await server.restart(signal);
      const at = (p) => `${server.url}${p}`;
      assert.equal(tok(await head(at(names[0]))), ta, "a keeps its token");
      assert.equal(tok(await head(at(names[1]))), tj, "b keeps its token");
      assert.equal(tok(await head(at(names[2]))), tc, "c keeps its current token");
      // The old incarnation's token stays refused after the restart.
      assertError(await get(`${at(names[2])}?offset=-1`, { "stream-incarnation": cOld }), 412, "INCARNATION_MISMATCH", { what: "old token after restart" });
      assert.equal(tok(await post(at(names[0]), "after")), ta, "appends after the restart keep it");
    });
  }
});

describe("Stream-Incarnation as a request precondition", () => {
  test("a matching token lets every kind of request proceed normally", async () => {
    const url = fresh();
    const t = await create(url, "ab");
    const H = { "stream-incarnation": t };
    assert.equal((await head(url, H)).status, 200);
    const g = await get(`${url}?offset=-1`, H);
    assert.equal(g.status, 200);
    assert.equal(g.text, "ab");
    const ap = await post(url, "cd", { headers: H });
    assert.equal(ap.status, 204);
    const lp = await get(`${url}?offset=${ap.headers.get("stream-next-offset")}&live=long-poll&timeout_ms=50`, H);
    assert.equal(lp.status, 204);
    const sse = await openSse(`${url}?offset=-1&live=sse`, { headers: H });
    sse.close();
    assert.equal(sse.status, 200);
    const again = await put(url, { body: "ab", headers: H });
    assert.equal(again.status, 200);
    const cl = await close(url, H);
    assert.equal(cl.status, 204);
    assert.equal((await del(url, H)).status, 204);
    assert.equal((await head(url)).status, 404);
  });

  test("a mismatching token answers 412 INCARNATION_MISMATCH with the current token, and applies nothing", async () => {
    const url = fresh();
    const old = await create(url, "old");
    assert.equal((await del(url)).status, 204);
    const cur = await create(url, "QQDATA");
    const tail = (await head(url)).headers.get("stream-next-offset");
    for (const bad of [old, otherToken(cur)]) {
      const H = { "stream-incarnation": bad };
      const checks = [
        ["GET", await get(`${url}?offset=-1`, H)],
        ["long-poll", await get(`${url}?offset=${tail}&live=long-poll&timeout_ms=50`, H)],
        ["SSE", await get(`${url}?offset=-1&live=sse`, H)],
        ["POST", await post(url, "ZZBODY", { headers: H })],
        ["close", await close(url, H)],
        ["PUT (would be 200)", await put(url, { body: "QQDATA", headers: H })],
        ["DELETE", await del(url, H)],
      ];
      for (const [what, r] of checks) {
        assertError(r, 412, "INCARNATION_MISMATCH", { what: `${what} with ${bad}` });
        assert.equal(tok(r), cur, `${what}: the 412 names the current token`);
        assert.ok(!r.text.includes("QQDATA") && !r.text.includes("ZZBODY"), `${what}: a refused request returns no data`);
      }
      const h = await head(url, H);
      assertError(h, 412, "INCARNATION_MISMATCH", { isHead: true, what: `HEAD with ${bad}` });
      assert.equal(tok(h), cur);
    }
    // Nothing applied: same tail, same bytes, still open, still there.
    const h = await head(url);
    assert.equal(h.status, 200);
    assert.equal(h.headers.get("stream-next-offset"), tail);
    assert.equal(h.headers.get("stream-closed"), null, "the refused close did not close it");
    assert.equal((await get(`${url}?offset=-1`)).text, "QQDATA");
  });

  test("on a missing stream the header does not turn 404 into 412", async () => {
    const url = fresh();
    const old = await create(url);
    assert.equal((await del(url)).status, 204);
    const H = { "stream-incarnation": old };
    for (const [what, r] of [
      ["GET", await get(`${url}?offset=-1`, H)],
      ["long-poll", await get(`${url}?offset=-1&live=long-poll&timeout_ms=50`, H)],
      ["SSE", await get(`${url}?offset=-1&live=sse`, H)],
      ["POST", await post(url, "x", { headers: H })],
      ["DELETE", await del(url, H)],
    ]) {
      assertError(r, 404, "STREAM_NOT_FOUND", { what });
      assert.equal(tok(r), null, `${what}: no token for a missing stream`);
    }
    assertError(await head(url, H), 404, undefined, { isHead: true, what: "HEAD" });
  });

  test("a PUT with the header on a missing stream answers 412 and creates nothing", async () => {
    const url = fresh();
    const old = await create(url);
    assert.equal((await del(url)).status, 204);
    for (const t of [old, otherToken(old)]) {
      const r = await put(url, { body: "x", headers: { "stream-incarnation": t } });
      assertError(r, 412, "INCARNATION_MISMATCH", { what: "PUT with a token on a missing stream" });
      assert.equal(tok(r), null, "no stream, no token");
      assert.equal((await head(url)).status, 404, "nothing was created");
    }
    // A never-existing stream too.
    const never = fresh();
    assertError(await put(never, { body: "x", headers: { "stream-incarnation": old } }), 412, "INCARNATION_MISMATCH", { what: "PUT on a never-created stream" });
    assert.equal((await head(never)).status, 404);
  });

  test("a malformed value answers 400", async () => {
    const url = fresh();
    const t = await create(url, "ab");
    const bad = [
      "abc", "", " ", "-1", "1", "0", "12.5", String(2 ** 53), String(2 ** 52 - 1), "0x10000000000000",
      `0${t}`, `+${t}`, `${t}.0`, `${t}abc`, `${t}, ${t}`, `${t},${t}`, "99999999999999999999999",
    ];
    for (const v of bad) {
      const H = { "stream-incarnation": v };
      for (const [what, r] of [
        ["GET", await get(`${url}?offset=-1`, H)],
        ["POST", await post(url, "zz", { headers: H })],
        ["PUT", await put(url, { body: "ab", headers: H })],
        ["DELETE", await del(url, H)],
      ]) assertError(r, 400, "INVALID_HEADER", { what: `${what} with ${JSON.stringify(v)}` });
      assertError(await head(url, H), 400, "INVALID_HEADER", { isHead: true, what: `HEAD with ${JSON.stringify(v)}` });
    }
    assert.equal((await get(`${url}?offset=-1`)).text, "ab", "nothing applied");
    assert.equal((await head(url)).status, 200);
  });

  test("the header sent twice answers 400, even with equal values", async () => {
    const url = fresh();
    const t = await create(url, "ab");
    const p = url.slice(server.url.length);
    for (const [a, b] of [[t, t], [t, otherToken(t)]]) {
      const r = await raw(server.port, `GET ${p}?offset=-1 HTTP/1.1\r\nHost: x\r\nStream-Incarnation: ${a}\r\nStream-Incarnation: ${b}\r\nConnection: close`);
      assertError(rawAsResponse(r), 400, "INVALID_HEADER", { what: `GET with two headers ${a} ${b}` });
      const w = await raw(server.port, `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nStream-Incarnation: ${a}\r\nStream-Incarnation: ${b}\r\nConnection: close`, { body: "zz" });
      assertError(rawAsResponse(w), 400, "INVALID_HEADER", { what: `POST with two headers ${a} ${b}` });
    }
    assert.equal((await get(`${url}?offset=-1`)).text, "ab", "nothing applied");
  });
});

describe("live reads end when the stream goes away", () => {
  test("a long-poll on a stream that gets deleted answers 404", async () => {
    const url = fresh();
    await create(url, "x");
    const tail = (await head(url)).headers.get("stream-next-offset");
    const t0 = performance.now();
    const lp = get(`${url}?offset=${tail}&live=long-poll&timeout_ms=20000`);
    await sleep(300);
    assert.equal((await del(url)).status, 204);
    const r = await lp;
    const ms = performance.now() - t0;
    assertError(r, 404, "STREAM_NOT_FOUND", { what: "long-poll after delete" });
    assert.ok(ms < 10000, `the long-poll ended ${Math.round(ms)} ms after it began`);
  });

  test("a long-poll with the token on a stream deleted and recreated never answers with the new stream", async () => {
    const url = fresh();
    const t = await create(url, "x");
    const tail = (await head(url)).headers.get("stream-next-offset");
    const lp = get(`${url}?offset=${tail}&live=long-poll&timeout_ms=20000`, { "stream-incarnation": t });
    await sleep(300);
    assert.equal((await del(url)).status, 204);
    await create(url, "x");
    await post(url, "data of the new stream");
    const r = await lp;
    assert.ok(r.status === 404 || r.status === 412, `long-poll answered ${r.status} ${r.text}`);
    assertError(r, r.status, r.status === 404 ? "STREAM_NOT_FOUND" : "INCARNATION_MISMATCH", { what: "long-poll across a recreate" });
  });

  test("an SSE read on a stream that gets deleted ends with an error event carrying the error body on one line", async () => {
    const url = fresh();
    await create(url, "x");
    const sse = await openSse(`${url}?offset=-1&live=sse`);
    try {
      assert.equal(sse.status, 200);
      assert.ok(await sse.waitFor((ev) => ev.some((e) => e.type === "control"), 5000), "first control event");
      assert.equal((await del(url)).status, 204);
      assert.ok(await sse.waitFor((ev) => ev.some((e) => e.type === "error"), 5000), `events: ${JSON.stringify(sse.events)}`);
      const e = sse.events.find((x) => x.type === "error");
      assert.equal(e.lines.length, 1, `the error body is on one data line: ${JSON.stringify(e.lines)}`);
      const body = JSON.parse(e.data);
      assert.equal(typeof body.error, "object");
      assert.equal(body.error.code, "STREAM_NOT_FOUND");
      assert.equal(typeof body.error.message, "string");
      assert.ok(await sse.waitEnd(5000), "the SSE response ends after the error event");
      assert.equal(sse.events.at(-1).type, "error", "nothing follows the error event");
    } finally {
      sse.close();
    }
  });
});

describe("Stream-Retained-Offset", () => {
  test("on every successful HEAD; before any retention it is the offset of the stream's first byte", async () => {
    // An empty stream: the first byte will be at the tail.
    const url = fresh();
    const c = await put(url, {});
    assert.equal(c.status, 201);
    const first = c.headers.get("stream-next-offset");
    const h0 = await head(url);
    assert.equal(h0.headers.get("stream-retained-offset"), first);
    await post(url, "abc");
    await post(url, "def");
    const h1 = await head(url);
    assert.equal(h1.headers.get("stream-retained-offset"), first, "appends do not move it");
    assert.ok(first < h1.headers.get("stream-next-offset"), "it sorts below the tail");
    const g = await get(`${url}?offset=${h1.headers.get("stream-retained-offset")}`);
    assert.equal(g.status, 200);
    assert.equal(g.text, "abcdef", "reading from it returns the whole stream");
    await close(url);
    assert.equal((await head(url)).headers.get("stream-retained-offset"), first, "present on a closed stream");
  });

  test("for a stream created with content, reading from it returns everything", async () => {
    for (const [type, body, want] of [["text/plain", "hello", "hello"], ["application/json", '[{"a" : 1}, 2]', '{"a":1}\n2\n']]) {
      const url = fresh();
      await create(url, body, type);
      const h = await head(url);
      const ro = h.headers.get("stream-retained-offset");
      assert.ok(ro, `${type}: HEAD carries Stream-Retained-Offset`);
      const g = await get(`${url}?offset=${ro}`);
      assert.equal(g.status, 200);
      assert.equal(g.text, want);
      assert.equal(g.text, (await get(`${url}?offset=-1`)).text);
    }
  });

  test("it survives a restart unchanged", async () => {
    const url = fresh();
    await create(url, "abc");
    const ro = (await head(url)).headers.get("stream-retained-offset");
    assert.ok(ro);
    const p = url.slice(server.url.length);
    await server.restart();
    const h = await head(`${server.url}${p}`);
    assert.equal(h.status, 200);
    assert.equal(h.headers.get("stream-retained-offset"), ro);
  });
});
