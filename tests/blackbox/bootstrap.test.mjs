// Bootstrap, and the strict RFC 2046 multipart parser it is read with.
// Covers extensions.txt §3 Bootstrap: §3.1 (no query parameters: 400), §3.2
// (multipart/mixed with a fresh unpredictable boundary per response; the
// snapshot part first with its stored content type, or an empty
// application/octet-stream part and Stream-Snapshot-Offset: -1; update
// parts from the snapshot point with the update's content type, one message
// per part for a JSON stream holding exactly the stored message text, one or
// more parts for a binary stream whose bytes concatenate to the stream's;
// Complete form: Stream-Next-Offset = tail and Stream-Up-To-Date: true;
// Partial form (the server caps update parts at 8 MiB per response, at
// least one message): no Stream-Up-To-Date: true and a Stream-Next-Offset
// that ordinary reads accept; 404 for a missing stream), §3.3 (ordinary
// reads from Stream-Next-Offset return the rest), §3.4, §2.4
// (Stream-Incarnation on bootstrap and its precondition) and §11.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, get, head, otherToken, post, readPages } from "./lib/bucket.mjs";
import { buildMultipart, MultipartError, parseMultipart, parseMultipartType, validBoundary } from "./lib/multipart.mjs";
import { MiB, append, createStream, enc, h, offsetAfter, publishOk, pseudoRandom, sha256, tok, stopAndRemove } from "./lib/snap.mjs";

// ---------------------------------------------------------------------------
describe("the multipart parser itself (RFC 2046 §5.1.1)", () => {
  const B = "b0und4ry";
  const bad = (s, opts) => assert.throws(() => parseMultipart(Buffer.from(s, "latin1"), B, opts), MultipartError, JSON.stringify(s));

  test("parses parts with headers, raw bodies and an empty first part", () => {
    const body = `--${B}\r\nContent-Type: application/octet-stream\r\n\r\n\r\n--${B}\r\nContent-Type: application/json\r\nX-Extra:  v \r\n\r\n{"a":1}\r\n--${B}--`;
    const { preamble, parts, epilogue } = parseMultipart(Buffer.from(body), B);
    assert.equal(preamble.length, 0);
    assert.equal(epilogue.length, 0);
    assert.equal(parts.length, 2);
    assert.equal(parts[0].headers.get("content-type"), "application/octet-stream");
    assert.equal(parts[0].body.length, 0);
    assert.equal(parts[1].headers.get("content-type"), "application/json");
    assert.equal(parts[1].headers.get("x-extra"), "v");
    assert.deepEqual(parts[1].rawHeaders, [["Content-Type", "application/json"], ["X-Extra", "v"]]);
    assert.equal(parts[1].body.toString(), '{"a":1}');
  });

  test("a part without headers starts with the blank line", () => {
    const { parts } = parseMultipart(Buffer.from(`--${B}\r\n\r\nno headers\r\n--${B}--`), B);
    assert.equal(parts[0].headers.size, 0);
    assert.equal(parts[0].body.toString(), "no headers");
  });

  test("binary bodies keep CR, LF, dashes and near-boundaries byte for byte", () => {
    const tricky = Buffer.concat([
      Buffer.from(`\r\n\r\n--\r\n-${B}\r\n--${B.slice(0, -1)}\r\nx--${B}\n--${B}\r`),
      Buffer.from([0, 255, 13, 10, 45, 45]),
    ]);
    const body = buildMultipart(B, [{ headers: [["Content-Type", "application/octet-stream"]], body: tricky }, { body: Buffer.alloc(0) }]);
    const { parts } = parseMultipart(body, B);
    assert.equal(parts.length, 2);
    assert.deepEqual(parts[0].body, tricky);
    assert.equal(parts[1].body.length, 0);
  });

  test("a close-delimiter followed by CRLF and an epilogue is returned as such", () => {
    const { parts, epilogue } = parseMultipart(Buffer.from(`--${B}\r\n\r\nx\r\n--${B}--\r\nthe end`), B);
    assert.equal(parts.length, 1);
    assert.equal(epilogue.toString(), "the end");
    assert.equal(parseMultipart(Buffer.from(`--${B}\r\n\r\nx\r\n--${B}--\r\n`), B).epilogue.length, 0);
  });

  test("framing errors are rejected", () => {
    bad(`--${B}\r\n\r\nx\r\n--${B}`); // no close-delimiter
    bad(`--${B}\r\n\r\nx`); // no delimiter at all
    bad(`--${B}\n\nx\n--${B}--`); // LF framing
    bad(`--${B}\r\n\r\nx\n--${B}--`); // delimiter without its CR
    bad(`--${B}\r\n\r\nx\r\n--${B}--junk`); // bytes after the close-delimiter without CRLF
    bad(`--${B}--`); // no body part
    bad(`--${B}Z\r\n\r\nx\r\n--${B}--`); // a longer boundary in the opener
    bad(`--${B}\r\n\r\nx\r\n--${B}Z\r\n\r\ny\r\n--${B}--`); // the boundary occurs in the data
    bad(`--${B}\r\nContent-Type: a\r\nx\r\n--${B}--`); // no blank line ends the headers
    bad(`--${B}\r\nContent-Type: a\r\n folded\r\n\r\nx\r\n--${B}--`); // folded header
    bad(`--${B}\r\nno colon here\r\n\r\nx\r\n--${B}--`); // malformed header
    bad(`--${B}\r\nA: 1\r\na: 2\r\n\r\nx\r\n--${B}--`); // repeated header
    bad(`preamble\r\n--${B}\r\n\r\nx\r\n--${B}--`); // a preamble (strict)
    bad(`--${B} \r\n\r\nx\r\n--${B}--`); // transport padding (strict)
    bad(`\r\n--${B}\r\n\r\nx\r\n--${B}--`); // a leading CRLF is an (empty) preamble
  });

  test("the relaxations accept a preamble and transport padding", () => {
    const p = parseMultipart(Buffer.from(`preamble\r\n--${B}\r\n\r\nx\r\n--${B}--`), B, { allowPreamble: true });
    assert.equal(p.preamble.toString(), "preamble");
    assert.equal(p.parts[0].body.toString(), "x");
    const q = parseMultipart(Buffer.from(`--${B} \t\r\n\r\nx\r\n--${B}  \r\n\r\ny\r\n--${B}-- \r\n`), B, { allowPadding: true });
    assert.deepEqual(q.parts.map((x) => x.body.toString()), ["x", "y"]);
  });

  test("boundaries and the Content-Type parameter are validated", () => {
    assert.equal(validBoundary("a"), true);
    assert.equal(validBoundary("x".repeat(70)), true);
    assert.equal(validBoundary("x".repeat(71)), false);
    assert.equal(validBoundary("ends with space "), false);
    assert.equal(validBoundary(""), false);
    assert.equal(validBoundary("semi;colon"), false);
    assert.deepEqual(parseMultipartType("multipart/mixed; boundary=abc"), { type: "multipart/mixed", boundary: "abc" });
    assert.deepEqual(parseMultipartType('Multipart/Mixed;boundary="a b:c"'), { type: "multipart/mixed", boundary: "a b:c" });
    assert.throws(() => parseMultipartType("multipart/mixed"), MultipartError);
    assert.throws(() => parseMultipartType("text/plain; boundary=abc"), MultipartError);
    assert.throws(() => parseMultipartType("multipart/mixed; boundary=a; boundary=b"), MultipartError);
    assert.throws(() => parseMultipart(Buffer.from("--x\r\n\r\n\r\n--x--"), "bad boundary "), MultipartError);
  });
});

// ---------------------------------------------------------------------------
const server = new Server();
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;
const fresh = (bucket = "bootb") => `${server.url}/${bucket}/s${++n}`;
const OCTET = "application/octet-stream";

// GET /bootstrap, parsed strictly. Asserts 200, the multipart/mixed type,
// no preamble and no epilogue; returns {r, boundary, parts}.
async function bootstrap(url, headers = {}) {
  const r = await get(`${url}/bootstrap`, headers);
  assert.equal(r.status, 200, `bootstrap answered ${r.status} ${r.text}`);
  const ct = h(r, "content-type");
  const { type, boundary } = parseMultipartType(ct);
  assert.equal(type, "multipart/mixed", `Content-Type ${ct}`);
  const { preamble, parts, epilogue } = parseMultipart(r.body, boundary);
  assert.equal(preamble.length, 0, "no preamble");
  assert.equal(epilogue.length, 0, "no epilogue");
  assert.ok(parts.length >= 1, "at least the snapshot part");
  return { r, boundary, parts, snap: parts[0], updates: parts.slice(1) };
}

const concat = (parts) => Buffer.concat(parts.map((p) => p.body));

async function streamType(url) {
  const r = await head(url);
  assert.equal(r.status, 200);
  return h(r, "content-type");
}

describe("§3.2 bootstrap without a snapshot", () => {
  test("an empty application/octet-stream first part, Stream-Snapshot-Offset: -1, the updates from the first offset, complete", async () => {
    const url = fresh();
    const c = await createStream(url, { type: OCTET, body: Buffer.from("binary\r\n--data\u0000") });
    const b = await bootstrap(url);
    assert.equal(h(b.r, "stream-snapshot-offset"), "-1");
    assert.equal(b.snap.body.length, 0, "the first part is empty");
    assert.equal(b.snap.headers.get("content-type"), OCTET);
    assert.ok(b.updates.length >= 1, "the bytes come in update parts");
    for (const p of b.updates) assert.equal(p.headers.get("content-type"), OCTET, "each update part has the update's type");
    assert.deepEqual(concat(b.updates), Buffer.from("binary\r\n--data\u0000"));
    assert.equal(h(b.r, "stream-next-offset"), c.tail);
    assert.equal(h(b.r, "stream-up-to-date"), "true");
    assert.equal(tok(b.r), c.token);
  });

  test("an empty stream: only the empty first part; Stream-Next-Offset is the snapshot point (its first offset)", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "text/plain" });
    const b = await bootstrap(url);
    assert.equal(b.parts.length, 1);
    assert.equal(b.snap.body.length, 0);
    assert.equal(b.snap.headers.get("content-type"), OCTET);
    assert.equal(h(b.r, "stream-snapshot-offset"), "-1");
    assert.equal(h(b.r, "stream-next-offset"), c.tail);
    assert.equal(h(b.r, "stream-up-to-date"), "true");
  });

  test("a JSON stream: one part per message, each exactly the stored text without LF, typed as the stream", async () => {
    const url = fresh();
    await createStream(url, { type: "application/json" });
    await append(url, '[ {"b" : 2, "a":[1, 2.50e3]} , "str\\u0041 ing" , 7 , {"nested":{"k":[true,null]}} ]', "application/json");
    await append(url, '{ "z" :\t"last" }', "application/json");
    const type = await streamType(url);
    const b = await bootstrap(url);
    assert.deepEqual(
      b.updates.map((p) => p.body.toString()),
      ['{"b":2,"a":[1,2.50e3]}', '"str\\u0041 ing"', "7", '{"nested":{"k":[true,null]}}', '{"z":"last"}'],
    );
    for (const p of b.updates) assert.equal(p.headers.get("content-type"), type);
    assert.equal(h(b.r, "stream-up-to-date"), "true");
    // The parts agree with the ordinary NDJSON read of the same bytes.
    const all = Buffer.concat((await readPages(url)).map((p) => p.body)).toString();
    assert.equal(all, b.updates.map((p) => `${p.body}\n`).join(""));
  });

  test("every response has a fresh, valid boundary", async () => {
    const url = fresh();
    await createStream(url, { type: OCTET, body: Buffer.from("x") });
    const seen = new Set();
    for (let i = 0; i < 5; i++) {
      const b = await bootstrap(url);
      assert.ok(validBoundary(b.boundary));
      assert.ok(b.boundary.length >= 16, `an unpredictable boundary: ${b.boundary}`);
      seen.add(b.boundary);
    }
    assert.equal(seen.size, 5, "five responses, five boundaries");
  });

  test("stream bytes that contain an earlier response's boundary line do not break the framing", async () => {
    const url = fresh();
    await createStream(url, { type: OCTET, body: Buffer.from("seed") });
    const first = await bootstrap(url);
    const payload = Buffer.from(`\r\n--${first.boundary}\r\nContent-Type: text/evil\r\n\r\nX\r\n--${first.boundary}--\r\n`);
    await append(url, payload, OCTET);
    const b = await bootstrap(url);
    assert.notEqual(b.boundary, first.boundary);
    assert.deepEqual(concat(b.updates), Buffer.concat([Buffer.from("seed"), payload]));
  });
});

describe("§3.2 bootstrap with a snapshot", () => {
  test("the snapshot part first with its stored type, then the updates from the snapshot offset", async () => {
    const url = fresh();
    const c = await createStream(url, { type: OCTET, body: Buffer.from("0123456789abcdef") });
    const off = await offsetAfter(url, 10);
    const snapBody = Buffer.from([1, 2, 3, 13, 10, 45, 45, 0]);
    await publishOk(url, off, snapBody, { type: "application/x-doc; v=1" });
    const b = await bootstrap(url);
    assert.equal(h(b.r, "stream-snapshot-offset"), off);
    assert.equal(b.snap.headers.get("content-type"), "application/x-doc; v=1");
    assert.deepEqual(b.snap.body, snapBody);
    assert.equal(concat(b.updates).toString(), "abcdef");
    for (const p of b.updates) assert.equal(p.headers.get("content-type"), OCTET);
    assert.equal(h(b.r, "stream-next-offset"), c.tail);
    assert.equal(h(b.r, "stream-up-to-date"), "true");
    assert.equal(tok(b.r), c.token);
  });

  test("a snapshot at the tail: only the snapshot part, Stream-Next-Offset is the snapshot offset, complete", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "text/plain", body: "text" });
    await publishOk(url, c.tail, "snap", { type: "text/x-state" });
    const b = await bootstrap(url);
    assert.equal(b.parts.length, 1);
    assert.equal(b.snap.body.toString(), "snap");
    assert.equal(b.snap.headers.get("content-type"), "text/x-state");
    assert.equal(h(b.r, "stream-snapshot-offset"), c.tail);
    assert.equal(h(b.r, "stream-next-offset"), c.tail);
    assert.equal(h(b.r, "stream-up-to-date"), "true");
  });

  test("a JSON stream: the messages after the snapshot, one per part", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "application/json" });
    await append(url, '[{"m":1},{"m":2},{"m":3},{"m":4}]', "application/json");
    const off = await offsetAfter(url, 16, c.tail); // after two messages
    await publishOk(url, off, '{"state":2}', { type: "application/json" });
    const b = await bootstrap(url);
    assert.equal(b.snap.body.toString(), '{"state":2}');
    assert.equal(b.snap.headers.get("content-type"), "application/json");
    assert.deepEqual(b.updates.map((p) => p.body.toString()), ['{"m":3}', '{"m":4}']);
  });

  test("a text stream with a charset: the update parts carry the stream's content type", async () => {
    const url = fresh();
    await createStream(url, { type: "text/plain; charset=utf-8", body: "héllo" });
    const type = await streamType(url);
    const b = await bootstrap(url);
    for (const p of b.updates) assert.equal(p.headers.get("content-type"), type);
    assert.equal(concat(b.updates).toString(), "héllo");
  });

  test("a cold-tier snapshot (6 MiB) is the first part byte for byte", async () => {
    const url = fresh();
    const c = await createStream(url, { type: OCTET, body: Buffer.from("abc") });
    const body = pseudoRandom(6 * MiB + 5, "boot-cold");
    await publishOk(url, c.tail, body);
    await append(url, Buffer.from("after"), OCTET);
    const b = await bootstrap(url);
    assert.equal(b.snap.body.length, body.length);
    assert.equal(sha256(b.snap.body), sha256(body));
    assert.equal(concat(b.updates).toString(), "after");
  });

  test("a superseding snapshot replaces the first part at once", async () => {
    const url = fresh();
    const c = await createStream(url, { type: OCTET, body: Buffer.from("0123456789") });
    await publishOk(url, await offsetAfter(url, 3), "old");
    await publishOk(url, c.tail, "new");
    const b = await bootstrap(url);
    assert.equal(b.snap.body.toString(), "new");
    assert.equal(h(b.r, "stream-snapshot-offset"), c.tail);
  });
});

describe("§3.2 completeness: the complete form up to the 8 MiB cap", () => {
  test("6 MiB of binary updates (above the 4 MiB read cap): complete, the parts concatenate to the bytes", async () => {
    const url = fresh();
    const c = await createStream(url, { type: OCTET });
    const data = pseudoRandom(6 * MiB, "boot-6");
    const tail = await append(url, data, OCTET);
    const b = await bootstrap(url);
    assert.equal(h(b.r, "stream-next-offset"), tail);
    assert.equal(h(b.r, "stream-up-to-date"), "true");
    assert.equal(sha256(concat(b.updates)), sha256(data));
    assert.ok(c.token);
  });

  test("6 MiB of JSON messages: complete, one part per message", async () => {
    const url = fresh();
    await createStream(url, { type: "application/json" });
    const msgs = Array.from({ length: 60 }, (_, i) => JSON.stringify({ i, pad: "z".repeat(100 * 1024) }));
    await append(url, `[${msgs.join(",")}]`, "application/json");
    const tail = h(await head(url), "stream-next-offset");
    const b = await bootstrap(url);
    assert.equal(h(b.r, "stream-next-offset"), tail);
    assert.equal(h(b.r, "stream-up-to-date"), "true");
    assert.equal(b.updates.length, 60);
    assert.ok(b.updates.every((p, i) => p.body.toString() === msgs[i]));
  });
});

describe("§3.2 completeness: the partial form", () => {
  // A JSON message of about `size` bytes.
  const msg = (i, size) => JSON.stringify({ i, pad: "x".repeat(size - 20 - String(i).length) });

  test("more than 8 MiB of JSON updates: a partial response at a message boundary; ordinary reads return the rest", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "application/json" });
    const msgs = Array.from({ length: 130 }, (_, i) => msg(i, 100 * 1024));
    await append(url, `[${msgs.slice(0, 65).join(",")}]`, "application/json");
    await append(url, `[${msgs.slice(65).join(",")}]`, "application/json");
    const tail = h(await head(url), "stream-next-offset");
    const b = await bootstrap(url);
    assert.notEqual(h(b.r, "stream-up-to-date"), "true", "a partial response is not up to date");
    const next = h(b.r, "stream-next-offset");
    assert.notEqual(next, tail);
    const got = b.updates.map((p) => p.body.toString());
    assert.ok(got.length >= 1, "at least one message");
    const bytes = got.reduce((s, m) => s + m.length, 0);
    assert.ok(bytes <= 8 * MiB, `update parts hold ${bytes} bytes, at most 8 MiB`);
    assert.ok(bytes + got.length > 7 * MiB, `the cap is used: ${bytes} bytes in ${got.length} parts`);
    assert.deepEqual(got, msgs.slice(0, got.length), "the first messages, in order, each exactly");
    // Stream-Next-Offset is the boundary after the last returned message.
    assert.equal(next, await offsetAfter(url, got.reduce((s, m) => s + m.length + 1, 0), c.tail));
    const rest = Buffer.concat((await readPages(url, { offset: next })).map((p) => p.body)).toString();
    assert.equal(rest, msgs.slice(got.length).map((m) => `${m}\n`).join(""), "the rest starts at a message boundary");
  });

  test("a single JSON message above 8 MiB is returned whole (at least one message)", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "application/json" });
    const big = msg(0, 9 * MiB);
    await append(url, big, "application/json");
    await append(url, '{"small":1}', "application/json");
    const b = await bootstrap(url);
    // The server caps update parts at 8 MiB per response and includes at
    // least one message: the 9 MiB message alone, then the partial form.
    assert.equal(b.updates.length, 1, `the big message alone, past the 8 MiB cap nothing more; got parts of ${b.updates.map((p) => p.body.length)} bytes`);
    assert.equal(b.updates[0].body.length, big.length);
    assert.ok(b.updates[0].body.toString() === big);
    assert.notEqual(h(b.r, "stream-up-to-date"), "true");
    const next = h(b.r, "stream-next-offset");
    assert.equal(next, await offsetAfter(url, big.length + 1, c.tail));
    const rest = await get(`${url}?offset=${enc(next)}`);
    assert.equal(rest.status, 200);
    assert.equal(rest.text, '{"small":1}\n');
  });

  test("more than 8 MiB of binary updates: the parts and the reads from Stream-Next-Offset give every byte once", async () => {
    const url = fresh();
    const c = await createStream(url, { type: OCTET });
    const data = pseudoRandom(10 * MiB, "boot-binary");
    await append(url, data.subarray(0, 5 * MiB), OCTET);
    await append(url, data.subarray(5 * MiB), OCTET);
    const tail = h(await head(url), "stream-next-offset");
    const b = await bootstrap(url);
    assert.notEqual(h(b.r, "stream-up-to-date"), "true");
    const next = h(b.r, "stream-next-offset");
    assert.notEqual(next, tail);
    const got = concat(b.updates);
    assert.ok(got.length <= 8 * MiB);
    assert.equal(next, got.length === 0 ? c.tail : await offsetAfter(url, got.length, c.tail));
    const rest = Buffer.concat((await readPages(url, { offset: next })).map((p) => p.body));
    assert.equal(sha256(got, rest), sha256(data));
  });

  test("a partial response after a snapshot starts at the snapshot offset", async () => {
    const url = fresh();
    const c = await createStream(url, { type: "application/json" });
    await append(url, '{"before":true}', "application/json");
    const snapAt = h(await head(url), "stream-next-offset");
    await publishOk(url, snapAt, "S");
    const msgs = Array.from({ length: 100 }, (_, i) => msg(i, 100 * 1024));
    await append(url, `[${msgs.join(",")}]`, "application/json");
    const b = await bootstrap(url);
    assert.equal(h(b.r, "stream-snapshot-offset"), snapAt);
    assert.notEqual(h(b.r, "stream-up-to-date"), "true");
    const got = b.updates.map((p) => p.body.toString());
    assert.ok(got.length >= 1);
    assert.deepEqual(got, msgs.slice(0, got.length));
    const rest = Buffer.concat((await readPages(url, { offset: h(b.r, "stream-next-offset") })).map((p) => p.body)).toString();
    assert.equal(rest, msgs.slice(got.length).map((m) => `${m}\n`).join(""));
    assert.ok(c.token);
  });
});

describe("§3.1 / §3.3 request and follow-up", () => {
  for (const q of ["live=sse", "live=long-poll", "offset=-1", "foo=bar", "x", "cursor=1"]) {
    test(`a query parameter (?${q}) answers 400`, async () => {
      const url = fresh();
      await createStream(url, { type: OCTET, body: Buffer.from("x") });
      const r = await get(`${url}/bootstrap?${q}`);
      assertError(r, 400, ["INVALID_QUERY", "QUERY_NOT_ACCEPTED"], { what: `?${q}` });
    });
  }

  test("a missing stream answers 404 without Stream-Incarnation", async () => {
    for (const url of [`${fresh()}-missing`, `${server.url}/nobucket/s`]) {
      const r = await get(`${url}/bootstrap`);
      assertError(r, 404, ["STREAM_NOT_FOUND", "BUCKET_NOT_FOUND"], { what: url });
      assert.equal(tok(r), null);
    }
  });

  test("Stream-Incarnation precondition: a match bootstraps, a mismatch answers 412 with the current token", async () => {
    const url = fresh();
    const c = await createStream(url, { type: OCTET, body: Buffer.from("x") });
    await bootstrap(url, { "stream-incarnation": c.token });
    const r = await get(`${url}/bootstrap`, { "stream-incarnation": otherToken(c.token) });
    assertError(r, 412, "INCARNATION_MISMATCH", { what: "bootstrap with another token" });
    assert.equal(tok(r), c.token);
  });

  test("after a complete bootstrap, reads from Stream-Next-Offset are up to date and then see new appends", async () => {
    const url = fresh();
    await createStream(url, { type: OCTET, body: Buffer.from("abc") });
    const b = await bootstrap(url);
    const next = h(b.r, "stream-next-offset");
    const r1 = await get(`${url}?offset=${enc(next)}`);
    assert.equal(r1.status, 200);
    assert.equal(r1.body.length, 0);
    assert.equal(h(r1, "stream-up-to-date"), "true");
    await append(url, Buffer.from("def"), OCTET);
    const r2 = await get(`${url}?offset=${enc(next)}&live=long-poll&timeout_ms=100`);
    assert.equal(r2.status, 200);
    assert.equal(r2.text, "def");
  });

  test("a closed stream bootstraps complete", async () => {
    const url = fresh();
    const c = await createStream(url, { type: OCTET, body: Buffer.from("closed") });
    assert.equal((await post(url, undefined, { type: null, headers: { "stream-closed": "true" } })).status, 204);
    const b = await bootstrap(url);
    assert.equal(concat(b.updates).toString(), "closed");
    assert.equal(h(b.r, "stream-next-offset"), c.tail);
    assert.equal(h(b.r, "stream-up-to-date"), "true");
  });
});
