// The gateway tests' assertions: the exact shape of an answer the gateway
// makes itself (docs/GATEWAY.md "The gateway's own answers", extensions
// §10-§11), an answer's comparable form for the standalone/embedded
// comparison, answers compared line by line, secrets looked for in text,
// and Prometheus samples.
import assert from "node:assert/strict";
import { SECRETS } from "./lib.mjs";

const mediaType = (v) => (v ?? "").split(";")[0].trim().toLowerCase();

// Asserts that r (an answer of wire.mjs) is the gateway's own refusal:
// status and code; Content-Type application/json; the §11 body with a
// string message naming no credential and no address (none for HEAD);
// Cache-Control no-store; neither Ursula-Protocol nor Ursula-Cluster-Id;
// no producer headers and no CORS `*`; Retry-After on every 503 and on
// RATE_LIMITED (retryAfter true asks it of any other); on a 413 the
// Ursula-Max-Request-Bytes given as maxBytes. Returns the parsed body.
export function assertOwn(r, status, code, { isHead = false, retryAfter = false, maxBytes = null, what = "" } = {}) {
  const ctx = `${what}: ${r.statusLine} ${JSON.stringify(r.headers)} ${r.text.slice(0, 300)}`;
  assert.equal(r.status, status, `status, ${ctx}`);
  assert.equal(mediaType(r.header("content-type")), "application/json", `Content-Type, ${ctx}`);
  assert.match(r.header("cache-control") ?? "", /(^|,)\s*no-store\s*(,|$)/i, `Cache-Control: no-store, ${ctx}`);
  assert.equal(r.header("ursula-protocol"), null, `no Ursula-Protocol on an answer of the gateway's own, ${ctx}`);
  assert.equal(r.header("ursula-cluster-id"), null, `no Ursula-Cluster-Id on an answer of the gateway's own, ${ctx}`);
  for (const h of ["producer-epoch", "producer-outcome", "producer-seq", "location"]) {
    assert.equal(r.header(h), null, `no ${h} on a refusal, ${ctx}`);
  }
  assert.notEqual(r.header("access-control-allow-origin"), "*", `no CORS * behind the gate, ${ctx}`);
  if (status === 503 || code === "RATE_LIMITED" || retryAfter) {
    assert.match(r.header("retry-after") ?? "", /^[0-9]+$/, `Retry-After in seconds, ${ctx}`);
  }
  if (status === 413) {
    assert.equal(r.header("ursula-max-request-bytes"), String(maxBytes), `Ursula-Max-Request-Bytes names the limit, ${ctx}`);
  }
  if (isHead) {
    assert.equal(r.body.length, 0, `a HEAD answer carries no body, ${ctx}`);
    return null;
  }
  let body;
  assert.doesNotThrow(() => (body = JSON.parse(r.text)), `the body is JSON, ${ctx}`);
  assert.ok(body && typeof body.error === "object" && body.error !== null, `an error object, ${ctx}`);
  assert.equal(body.error.code, code, `error.code, ${ctx}`);
  assert.equal(typeof body.error.message, "string", `error.message is a string, ${ctx}`);
  assertNoSecrets(r.text, `the body of ${what}`);
  assert.doesNotMatch(body.error.message, /127\.0\.0\.1|localhost|https?:\/\/|:\d{4,5}\b/, `the message names no address, ${ctx}`);
  return body;
}

// Asserts that r came from a node through the gate: it carries the node's
// identity (Ursula-Protocol 2 and an Ursula-Cluster-Id).
export function assertFromNode(r, status, what = "") {
  const ctx = `${what}: ${r.statusLine} ${r.text.slice(0, 300)}`;
  assert.equal(r.status, status, `status, ${ctx}`);
  assert.equal(r.header("ursula-protocol"), "2", `the node's answer passes through with Ursula-Protocol, ${ctx}`);
  assert.ok(r.header("ursula-cluster-id"), `the node's answer passes through with Ursula-Cluster-Id, ${ctx}`);
}

// An answer reduced to what must be the same in both forms of the gate:
// status, body, and the names of its headers but Date and the transport's.
const TRANSPORT = new Set(["date", "connection", "keep-alive", "transfer-encoding", "content-length", "retry-after"]);
export function comparable(r) {
  const names = [...new Set(r.headers.map(([k]) => k.toLowerCase()).filter((k) => !TRANSPORT.has(k)))].sort();
  return { status: r.status, body: r.text, headers: names, retryAfter: r.header("retry-after") !== null };
}

// An answer's header lines without those named (lowercase) in `drop`.
export function headerLines(r, drop = []) {
  return r.headers.filter(([k]) => !drop.includes(k.toLowerCase())).map(([k, v]) => `${k}: ${v}`);
}

// Asserts that two answers are the same bytes: the status line, every
// header line in order but those in `drop` (and Date), and the body.
export function assertSameAnswer(a, b, drop, what) {
  const d = ["date", ...drop];
  assert.equal(a.statusLine, b.statusLine, `status line, ${what}`);
  assert.deepEqual(headerLines(a, d), headerLines(b, d), `header lines, ${what}`);
  assert.equal(a.body.toString("latin1"), b.body.toString("latin1"), `body, ${what}`);
}

// Asserts that text holds none of the test's secrets, whole or as a
// distinctive piece (the last 16 characters; for a JWT its signature).
export function assertNoSecrets(text, where) {
  for (const s of SECRETS) {
    const pieces = [s, s.slice(-16)];
    if (s.split(".").length === 3 && s.split(".")[2].length >= 16) pieces.push(s.split(".")[2]);
    for (const p of pieces) assert.ok(!text.includes(p), `${where} holds a credential (${p.slice(0, 8)}...)`);
  }
}

// The value of a Prometheus sample `name{labels}` in text (labels: an
// object, matched exactly as a set); 0 when absent.
export function sample(text, name, labels = {}) {
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = {};
    for (const [, k, v] of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) got[k] = v;
    const want = Object.entries(labels);
    if (want.length === Object.keys(got).length && want.every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return 0;
}
