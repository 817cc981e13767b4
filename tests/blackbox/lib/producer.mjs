// Helpers for the producer black-box tests (producers_*.test.mjs,
// extensions.txt §5): producer writes with their headers, BLAKE3 digests for
// Producer-Digest, reading receipts, checking producer refusals, and a
// pipelining raw-socket client.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { BIN } from "./server.mjs";
import { assertError, req } from "./bucket.mjs";

// The lowercase hex BLAKE3-256 of body: Runnel's test CLI next to the
// binary under test (cross-checked against b3sum by the unit tests), else
// b3sum.
const B3 = path.join(path.dirname(BIN), "tests", "runnel-b3");
export function b3(body) {
  const input = Buffer.from(body);
  const out = fs.existsSync(B3)
    ? execFileSync(B3, ["-"], { input })
    : execFileSync("b3sum", ["--no-names"], { input });
  return out.toString().trim();
}

// Both surfaces reach the same streams; tests run on each.
export const SURFACES = [
  { name: "v1", url: (server, id) => `${server.url}/v1/stream/prod/${id}` },
  { name: "bucket", url: (server, id) => `${server.url}/prodb/${id}` },
];

// Creates a text stream; returns its Stream-Incarnation.
export async function createStream(url, { type = "text/plain", body } = {}) {
  const r = await req(url, { method: "PUT", headers: { "content-type": type }, body });
  assert.equal(r.status, 201, `create answered ${r.status} ${r.text}`);
  return r.headers.get("stream-incarnation");
}

// The headers of a producer write. `digest: true` sends the body's digest.
export function producerHeaders({ id = "p", epoch = 0, seq = 0, body, digest, incarnation, close, type = "text/plain" } = {}) {
  const h = { "producer-id": id, "producer-epoch": String(epoch), "producer-seq": String(seq) };
  if (type !== null) h["content-type"] = type;
  if (digest === true) h["producer-digest"] = b3(body ?? "");
  else if (digest) h["producer-digest"] = digest;
  if (incarnation) h["stream-incarnation"] = incarnation;
  if (close) h["stream-closed"] = "true";
  return h;
}

// One producer write (POST); the answer with its body read. The body goes
// as bytes, so fetch adds no Content-Type of its own.
export function pwrite(url, opts = {}) {
  const body = opts.body === undefined ? undefined : Buffer.from(opts.body);
  return req(url, { method: "POST", headers: { ...producerHeaders(opts), ...(opts.headers ?? {}) }, body });
}

// The producer headers of an answer, as strings (null when absent).
export function answer(r) {
  const g = (n) => r.headers.get(n);
  return {
    status: r.status,
    offset: g("stream-offset"),
    next: g("stream-next-offset"),
    closed: g("stream-closed"),
    epoch: g("producer-epoch"),
    seq: g("producer-seq"),
    outcome: g("producer-outcome"),
    closedEpoch: g("producer-closed-epoch"),
    closedSeq: g("producer-closed-seq"),
    expectedSeq: g("producer-expected-seq"),
    receivedSeq: g("producer-received-seq"),
    incarnation: g("stream-incarnation"),
  };
}

// Offset token of a byte position.
export const off = (n) => `0000000000000000_${String(n).padStart(16, "0")}`;

// Asserts an applied write or a repeat with its receipt: [start, end).
export function assertReceipt(r, { status, start, end, epoch, seq, closed = false }, what = "") {
  const a = answer(r);
  const ctx = `${what}: ${r.status} ${JSON.stringify(a)} ${r.text}`;
  assert.equal(r.status, status, ctx);
  assert.equal(a.offset, off(start), `Stream-Offset ${ctx}`);
  assert.equal(a.next, off(end), `Stream-Next-Offset ${ctx}`);
  assert.equal(a.closed, closed ? "true" : null, `Stream-Closed ${ctx}`);
  assert.equal(a.epoch, String(epoch), `Producer-Epoch ${ctx}`);
  assert.equal(a.seq, String(seq), `Producer-Seq ${ctx}`);
  assert.equal(a.outcome, null, `no Producer-Outcome ${ctx}`);
  return a;
}

// Asserts a 204 repeat whose receipt the server no longer keeps.
export function assertEvicted(r, { epoch, seq }, what = "") {
  const a = answer(r);
  const ctx = `${what}: ${r.status} ${JSON.stringify(a)}`;
  assert.equal(r.status, 204, ctx);
  assert.equal(a.outcome, "receipt-evicted", ctx);
  assert.equal(a.offset, null, `no range ${ctx}`);
  assert.equal(a.next, null, `no range ${ctx}`);
  assert.equal(a.epoch, String(epoch), ctx);
  assert.equal(a.seq, String(seq), ctx);
  return a;
}

const CODES = {
  "stale-epoch": "PRODUCER_EPOCH_STALE",
  "epoch-closed;by=claim": "PRODUCER_EPOCH_CLOSED",
  "epoch-closed;by=history": "PRODUCER_EPOCH_CLOSED",
  "key-conflict": "PRODUCER_KEY_CONFLICT",
  "producer-expired": "PRODUCER_EXPIRED",
};

// Asserts a producer 403: Producer-Epoch, exactly one Producer-Outcome,
// the matching error code, and Producer-Closed-Epoch/-Seq exactly when
// `closed` ([epoch, seq]) is given.
export function assert403(r, outcome, epoch, { closed, what = "" } = {}) {
  const a = answer(r);
  const ctx = `${what}: ${r.status} ${JSON.stringify(a)} ${r.text}`;
  assertError(r, 403, CODES[outcome], { what: ctx });
  assert.equal(a.epoch, String(epoch), `Producer-Epoch ${ctx}`);
  assert.equal(a.outcome, outcome, `Producer-Outcome ${ctx}`);
  assert.equal(a.closedEpoch, closed ? String(closed[0]) : null, `Producer-Closed-Epoch ${ctx}`);
  assert.equal(a.closedSeq, closed ? String(closed[1]) : null, `Producer-Closed-Seq ${ctx}`);
  assert.equal(a.offset, null, ctx);
  return a;
}

// Sends raw HTTP/1.1 requests on one socket without waiting for answers
// and collects `count` responses (a response without Content-Length has no
// body here: producer answers are 204s or carry Content-Length).
export function pipeline(port, requests, { timeoutMs = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let buf = Buffer.alloc(0);
    const out = [];
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`pipeline: ${out.length} of ${requests.length} answers in ${timeoutMs} ms`));
    }, timeoutMs);
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) break;
        const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
        const headers = {};
        for (const line of lines.slice(1)) {
          const i = line.indexOf(":");
          headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
        }
        const len = Number(headers["content-length"] ?? 0);
        if (buf.length < end + 4 + len) break;
        out.push({ status: Number(lines[0].split(" ")[1]), headers: { get: (n) => headers[n.toLowerCase()] ?? null } });
        buf = buf.subarray(end + 4 + len);
      }
      if (out.length === requests.length) {
        clearTimeout(timer);
        sock.destroy();
        resolve(out);
      }
    });
    sock.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.write(Buffer.concat(requests.map((r) => Buffer.from(r))));
  });
}

// A raw POST request (head and body) for pipeline().
export function rawPost(pathname, headers, body = "") {
  const b = Buffer.from(body);
  const lines = [`POST ${pathname} HTTP/1.1`, "Host: 127.0.0.1", `Content-Length: ${b.length}`];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return Buffer.concat([Buffer.from(lines.join("\r\n") + "\r\n\r\n"), b]);
}
