// Large appends written while their body arrives (single node, no gate):
// a POST declaring a body of at least --large-append-bytes (not JSON, no
// Producer-Digest) is validated from its head, its stream reserved, and its
// bytes written to the stream's file as they are read; the append is
// logged (as a reference) once the last byte is synced. With
// --large-append-bytes 65536, bodies sent in parts over one socket:
//   - before the body's end, the first bytes are already in the stream's
//     data file while the append is unanswered and the tail has not moved;
//     once the rest is sent it answers 204 and every byte reads back exact;
//     runnel_appends_written_arriving_total counts it;
//   - a body cut by its client halfway (the socket destroyed) appends
//     nothing: the tail stays, the counters do not move, and the next
//     appends (one through the log, one large) read back exact where the
//     cut bytes lay;
//   - a body that stops coming is answered 408 BODY_TOO_SLOW
//     (--request-timeout-ms 1500, --min-body-rate 0) and appends nothing;
//   - while one large append holds its stream, a second one and a small
//     one sent after it wait (no answer), then apply in the order their
//     heads came: the stream is the first, the second, the small one;
//   - refusals decided from the head are answered only once the whole body
//     is in (ext §5.5 allows no others before it; the rest of the body is
//     read and dropped): a missing stream 404, another content type 409
//     CONTENT_TYPE_MISMATCH, a closed stream 409 STREAM_CLOSED, a stale
//     Stream-Seq 409; nothing appended; and so is one refused when its
//     turn comes behind another (which closed the stream) while the engine
//     had paused its body;
//   - a JSON stream's large append, one with Producer-Digest, and one over
//     HTTP/2 (whose streamed bodies come whole) take the path of a body
//     read whole (the counter does not move) and apply.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { Server, readAll, sleep } from "./lib/server.mjs";
import { assertError, head, req } from "./lib/bucket.mjs";
import { scrape } from "./lib/ops.mjs";
import { b3, off } from "./lib/producer.mjs";
import { streamDataFile } from "../lib/damage.mjs";

const KiB = 1024;
const MiB = 1 << 20;
const LARGE = 65536;
const OCTET = "application/octet-stream";

function body(n, marker = "") {
  const b = crypto.randomBytes(n);
  b.write(marker, 0, "latin1");
  return b;
}

// A POST sent in parts over its own socket: send(bytes), cut(), and
// `answer`, which resolves with {status, headers, text} once a whole answer
// came, or with null when the connection closed without one.
function upload(port, path, length, headers = {}) {
  const sock = net.connect(port, "127.0.0.1");
  const lines = [`POST ${path} HTTP/1.1`, "Host: 127.0.0.1", `Content-Length: ${length}`,
    ...Object.entries({ "Content-Type": OCTET, ...headers }).map(([k, v]) => `${k}: ${v}`)];
  sock.write(lines.join("\r\n") + "\r\n\r\n");
  let buf = Buffer.alloc(0);
  const answer = new Promise((resolve) => {
    let settled = false;
    const settle = (v) => { if (!settled) { settled = true; resolve(v); } };
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const [statusLine, ...hs] = buf.subarray(0, end).toString("latin1").split("\r\n");
      const h = new Map(hs.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
      const cl = Number(h.get("content-length") ?? 0);
      if (buf.length - end - 4 < cl) return;
      settle({ status: Number(statusLine.split(" ")[1]), headers: { get: (n) => h.get(n.toLowerCase()) ?? null },
        text: buf.subarray(end + 4, end + 4 + cl).toString() });
    });
    sock.on("close", () => settle(null));
    sock.on("error", () => settle(null));
  });
  return {
    answer,
    send: (b) => new Promise((resolve) => sock.write(b, resolve)),
    cut: () => sock.destroy(),
    end: () => sock.end(),
  };
}

// Whether p settles within ms: its value, or "pending".
const within = (p, ms) => Promise.race([p, sleep(ms).then(() => "pending")]);

const metric = async (server, name) => (await scrape(server.url)).get(name);
const tail = async (url) => (await head(url)).headers.get("stream-next-offset");

async function create(url, type = OCTET, b) {
  const r = await req(url, { method: "PUT", headers: { "content-type": type }, body: b });
  assert.equal(r.status, 201, `create ${url}: ${r.status} ${r.text}`);
}

describe("large appends written as their body arrives", () => {
  const server = new Server({ args: ["--large-append-bytes", String(LARGE), "--request-timeout-ms", "1500", "--min-body-rate", "0"] });
  before(() => server.start());
  after(async () => assert.deepEqual(await server.stop(), { code: 0, signal: null }));
  const path = (name) => new URL(server.stream(name)).pathname;

  test("the first bytes are in the stream's file before the body ends", async () => {
    const url = server.stream("arrive/overlap");
    const first = body(100, "MARK-OVERLAP");
    await create(url, OCTET, first);
    const a0 = await metric(server, "runnel_appends_written_arriving_total");
    const b = body(3 * MiB + 1234);
    const u = upload(server.port, path("arrive/overlap"), b.length);
    await u.send(b.subarray(0, 2 * MiB));
    const file = streamDataFile(server.dataDir, "MARK-OVERLAP");
    let seen = 0;
    for (let i = 0; i < 100 && seen < MiB; i++) {
      await sleep(20);
      const got = fs.readFileSync(file).subarray(first.length);
      seen = 0;
      while (seen < got.length && seen < b.length && got[seen] === b[seen]) seen++;
    }
    assert.ok(seen >= MiB, `the data file holds ${seen} of the body's first bytes before its end (expected a piece, ${MiB})`);
    assert.equal(await within(u.answer, 50), "pending", "no answer before the body's end");
    assert.equal(await tail(url), off(first.length), "the tail has not moved");
    await u.send(b.subarray(2 * MiB));
    const r = await u.answer;
    assert.equal(r?.status, 204, `the append answered ${r?.status} ${r?.text}`);
    assert.equal(r.headers.get("stream-next-offset"), off(first.length + b.length));
    u.end();
    assert.ok((await readAll(url)).body.equals(Buffer.concat([first, b])), "every byte reads back");
    assert.equal((await metric(server, "runnel_appends_written_arriving_total")) - a0, 1, "counted as written while arriving");
  });

  test("a body cut by its client appends nothing; the next appends take its place", async () => {
    const url = server.stream("arrive/cut");
    const first = body(5000, "MARK-CUT");
    await create(url, OCTET, first);
    const [a0, w0] = [await metric(server, "runnel_appends_written_arriving_total"), await metric(server, "runnel_appends_written_once_total")];
    const b = body(3 * MiB);
    const u = upload(server.port, path("arrive/cut"), b.length);
    await u.send(b.subarray(0, 1.5 * MiB));
    await sleep(200); // its first piece written past the tail
    u.cut();
    assert.equal(await u.answer, null, "no answer on a destroyed socket");
    // the server lets go of the stream: the next appends apply
    const small = body(3000), big = body(LARGE * 3 + 17);
    for (const x of [small, big]) {
      const r = await req(url, { method: "POST", headers: { "content-type": OCTET }, body: x });
      assert.equal(r.status, 204, `an append after the cut: ${r.status} ${r.text}`);
    }
    assert.ok((await readAll(url)).body.equals(Buffer.concat([first, small, big])), "the stream holds the bytes before the cut and the next appends");
    assert.equal((await metric(server, "runnel_appends_written_arriving_total")) - a0, 1, "only the next large append counted as arriving");
    assert.equal((await metric(server, "runnel_appends_written_once_total")) - w0, 1, "and as written once");
  });

  test("a body that stops coming is answered 408 and appends nothing", async () => {
    const url = server.stream("arrive/slow");
    await create(url);
    const b = body(2 * MiB);
    const u = upload(server.port, path("arrive/slow"), b.length);
    await u.send(b.subarray(0, MiB + 5));
    const r = await within(u.answer, 5000);
    assert.notEqual(r, "pending", "answered within the request timeout");
    assertError(r, 408, "BODY_TOO_SLOW", { what: "a stalled body" });
    u.cut();
    assert.equal(await tail(url), off(0), "nothing appended");
    const again = body(LARGE);
    assert.equal((await req(url, { method: "POST", headers: { "content-type": OCTET }, body: again })).status, 204);
    assert.ok((await readAll(url)).body.equals(again));
  });

  test("appends behind one that holds its stream wait, then apply in the order their heads came", async () => {
    const url = server.stream("arrive/order");
    await create(url);
    const A = body(2 * MiB + 100, "A"), B = body(MiB + 300, "B"), C = body(700, "C");
    const ua = upload(server.port, path("arrive/order"), A.length);
    await ua.send(A.subarray(0, MiB));
    await sleep(100); // A's head first
    const ub = upload(server.port, path("arrive/order"), B.length);
    await ub.send(B);
    await sleep(100);
    const pc = req(url, { method: "POST", headers: { "content-type": OCTET }, body: C });
    assert.equal(await within(ub.answer, 300), "pending", "B waits for A");
    assert.equal(await within(pc, 10), "pending", "so does a small append");
    await ua.send(A.subarray(MiB));
    for (const [what, p] of [["A", ua.answer], ["B", ub.answer], ["C", pc]]) {
      const r = await p;
      assert.equal(r?.status, 204, `${what} answered ${r?.status} ${r?.text}`);
    }
    ua.end();
    ub.end();
    assert.ok((await readAll(url)).body.equals(Buffer.concat([A, B, C])), "A, then B, then C");
  });

  test("refusals decided from the head are answered after the body", async () => {
    const url = server.stream("arrive/refused");
    await create(url, "text/plain");
    await req(url, { method: "POST", headers: { "content-type": "text/plain", "stream-seq": "5" }, body: "x" });
    const closed = server.stream("arrive/closed");
    await create(closed);
    assert.equal((await req(closed, { method: "POST", headers: { "stream-closed": "true" } })).status, 204);
    const cases = [
      ["a missing stream", "arrive/missing", {}, 404, "STREAM_NOT_FOUND"],
      ["another content type", "arrive/refused", {}, 409, "CONTENT_TYPE_MISMATCH"],
      ["a stale Stream-Seq", "arrive/refused", { "Content-Type": "text/plain", "Stream-Seq": "4" }, 409, "STREAM_SEQ_CONFLICT"],
      ["a closed stream", "arrive/closed", {}, 409, "STREAM_CLOSED"],
    ];
    for (const [what, name, headers, status, code] of cases) {
      const u = upload(server.port, path(name), 4 * MiB, headers);
      await u.send(body(100 * KiB));
      assert.equal(await within(u.answer, 300), "pending", `${what}: no answer before the body`);
      await u.send(body(4 * MiB - 100 * KiB));
      const r = await within(u.answer, 5000);
      assert.notEqual(r, "pending", `${what}: answered once the body is in`);
      assertError(r, status, code, { what });
      u.cut();
    }
    assert.equal(await tail(url), off(1), "nothing appended");
    assert.equal(await tail(closed), off(0), "nothing appended to the closed stream");
    // refused at its turn, behind an append that closes the stream, while
    // its body was paused (more than a piece of it waiting)
    const late = server.stream("arrive/late");
    await create(late);
    const A = body(2 * MiB), B = body(3 * MiB);
    const ua = upload(server.port, path("arrive/late"), A.length, { "Stream-Closed": "true" });
    await ua.send(A.subarray(0, MiB));
    await sleep(100);
    const ub = upload(server.port, path("arrive/late"), B.length);
    await ub.send(B.subarray(0, 2 * MiB));
    await sleep(200);
    await ua.send(A.subarray(MiB));
    assert.equal((await ua.answer)?.status, 204, "the closing append");
    assert.equal(await within(ub.answer, 300), "pending", "the refused one waits for its body");
    await ub.send(B.subarray(2 * MiB));
    const rb = await within(ub.answer, 5000);
    assert.notEqual(rb, "pending", "answered once its body is in");
    assertError(rb, 409, "STREAM_CLOSED", { what: "an append refused at its turn" });
    ua.end();
    ub.end();
    assert.equal(await tail(late), off(A.length), "only the closing append");
  });

  test("JSON, Producer-Digest and HTTP/2 appends take the whole-body path", async () => {
    const a0 = await metric(server, "runnel_appends_written_arriving_total");
    const json = server.stream("arrive/json");
    await create(json, "application/json");
    const text = JSON.stringify(Array.from({ length: 3000 }, (_, i) => ({ i, pad: "x".repeat(60) })));
    assert.equal((await req(json, { method: "POST", headers: { "content-type": "application/json" }, body: text })).status, 204);
    const bin = server.stream("arrive/digest");
    await create(bin);
    const b = body(2 * MiB);
    const r = await req(bin, { method: "POST", headers: { "content-type": OCTET, "producer-id": "p", "producer-epoch": "0", "producer-seq": "0",
      "producer-digest": b3(b) }, body: b });
    assert.equal(r.status, 200, `the Producer-Digest append: ${r.status} ${r.text}`);
    const h2 = server.stream("arrive/h2");
    await create(h2);
    const b2 = body(2 * MiB);
    const session = http2.connect(server.url);
    const status = await new Promise((resolve, reject) => {
      const s = session.request({ ":method": "POST", ":path": new URL(h2).pathname, "content-type": OCTET, "content-length": String(b2.length) });
      s.on("response", (h) => resolve(h[":status"]));
      s.on("error", reject);
      s.end(b2);
    });
    session.close();
    assert.equal(status, 204, "the HTTP/2 append");
    assert.equal((await metric(server, "runnel_appends_written_arriving_total")) - a0, 0, "none was taken while arriving");
    assert.ok((await readAll(bin)).body.equals(b));
    assert.ok((await readAll(h2)).body.equals(b2));
  });
});
