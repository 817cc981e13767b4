// Shared helpers for the bucket-surface black-box tests (bucket_*.test.mjs):
// plain requests with the body read, error-body checks (extensions §11),
// a raw-socket client for requests fetch cannot send, and an SSE reader.
import assert from "node:assert/strict";
import net from "node:net";

export { sleep } from "../../lib/server.mjs";

export const MAX_REQUEST_BYTES = 33554432;
export const TWO_52 = 2 ** 52;
export const TWO_53 = 2 ** 53;

// One request; the answer with its body read (bounded by a timeout).
export async function req(url, { method = "GET", headers = {}, body, timeoutMs = 15000 } = {}) {
  const res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(timeoutMs) });
  const buf = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, body: buf, text: buf.toString("utf8"), res };
}

export const head = (url, headers = {}) => req(url, { method: "HEAD", headers });
export const get = (url, headers = {}) => req(url, { headers });
export const del = (url, headers = {}) => req(url, { method: "DELETE", headers });
export function put(url, { type = "text/plain", body, headers = {} } = {}) {
  const h = { ...headers };
  if (type !== null) h["content-type"] = type;
  return req(url, { method: "PUT", headers: h, body });
}
export function post(url, body, { type = "text/plain", headers = {} } = {}) {
  const h = { ...headers };
  if (type !== null) h["content-type"] = type;
  return req(url, { method: "POST", headers: h, body });
}

// The media type of a Content-Type value, lowercased, parameters dropped.
export function mediaType(value) {
  return (value ?? "").split(";")[0].trim().toLowerCase();
}

// Asserts the §11 error shape: status, Content-Type application/json and
// {"error":{"code","message"}} with both members strings, and the server's
// identity (§10: Ursula-Protocol, Ursula-Cluster-Id). `code` may be a
// string or an array of acceptable codes. For HEAD, asserts an empty body.
// Returns the parsed body (null for HEAD).
export function assertError(r, status, code, { isHead = false, what = "" } = {}) {
  const ctx = `${what} answered ${r.status} ${r.text ?? ""}`;
  assert.equal(r.status, status, `status: ${ctx}`);
  // §10: the server's identity on every answer, every refusal included
  assert.equal(r.headers.get("ursula-protocol"), "2", `Ursula-Protocol: ${ctx}`);
  assert.match(r.headers.get("ursula-cluster-id") ?? "", /^[A-Za-z0-9._-]{1,64}$/, `Ursula-Cluster-Id: ${ctx}`);
  assert.equal(mediaType(r.headers.get("content-type")), "application/json", `Content-Type of the error: ${ctx}`);
  if (isHead) {
    assert.equal(r.body.length, 0, `a HEAD error carries no body: ${ctx}`);
    return null;
  }
  let parsed;
  assert.doesNotThrow(() => (parsed = JSON.parse(r.text)), `error body is JSON: ${ctx}`);
  assert.equal(typeof parsed, "object", ctx);
  assert.ok(parsed && typeof parsed.error === "object" && parsed.error !== null, `body has an error object: ${ctx}`);
  assert.equal(typeof parsed.error.code, "string", `error.code is a string: ${ctx}`);
  assert.equal(typeof parsed.error.message, "string", `error.message is a string: ${ctx}`);
  assert.match(parsed.error.code, /^[A-Z_]+$/, `error.code is uppercase letters and underscores: ${ctx}`);
  if (code !== undefined) {
    const codes = Array.isArray(code) ? code : [code];
    assert.ok(codes.includes(parsed.error.code), `error.code ${parsed.error.code} is one of ${codes.join(", ")}: ${ctx}`);
  }
  return parsed;
}

// A Stream-Incarnation value: canonical decimal integer in [2^52, 2^53).
export function assertToken(value, what = "Stream-Incarnation") {
  assert.equal(typeof value, "string", `${what} is present`);
  assert.match(value, /^[1-9][0-9]*$/, `${what} is a canonical decimal integer: ${value}`);
  const n = Number(value);
  assert.ok(n >= TWO_52 && n < TWO_53, `${what} ${value} lies in [2^52, 2^53)`);
  return value;
}

// A different token of valid form (in range), for mismatch tests.
export function otherToken(tok) {
  const n = BigInt(tok);
  const o = n + 1n < BigInt(TWO_53) ? n + 1n : n - 1n;
  return o.toString();
}

// Reads a stream from `offset` by following Stream-Next-Offset, with an
// optional query suffix (e.g. "&max_bytes=5"). Returns the pages.
export async function readPages(url, { offset = "-1", query = "", maxPages = 10000 } = {}) {
  const pages = [];
  for (let i = 0; i < maxPages; i++) {
    const r = await get(`${url}?offset=${encodeURIComponent(offset)}${query}`);
    assert.equal(r.status, 200, `GET ${url}?offset=${offset}${query} answered ${r.status} ${r.text}`);
    pages.push(r);
    const next = r.headers.get("stream-next-offset");
    assert.ok(next, "Stream-Next-Offset on a read");
    if (r.headers.get("stream-up-to-date") === "true") return pages;
    assert.notEqual(next, offset, "a read short of the tail advances the offset");
    offset = next;
  }
  throw new Error("stream did not end within the page bound");
}

// ---------------------------------------------------------------------------
// Raw HTTP/1.1 over a socket: for repeated headers, dot segments fetch would
// resolve, and answers that must come before a body is sent.

// Parses an HTTP/1.1 response head; headers as lowercase name -> [values].
function parseHead(buf) {
  const end = buf.indexOf("\r\n\r\n");
  if (end < 0) return null;
  const lines = buf.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
  if (!m) throw new Error(`bad status line: ${lines[0]}`);
  const headers = {};
  for (const line of lines.slice(1)) {
    const i = line.indexOf(":");
    const name = line.slice(0, i).trim().toLowerCase();
    (headers[name] ??= []).push(line.slice(i + 1).trim());
  }
  return { status: Number(m[1]), headers, bodyStart: end + 4 };
}

// Sends `head` (the request line and headers, CRLF separated, without the
// final blank line) plus an optional body. Resolves with the first response:
// {status, headers, header(name), body, trailing}. With untilClose it reads
// until the server closes (for HEAD answers: `body` is every byte after the
// head). Otherwise it stops after Content-Length bytes of body.
export function raw(port, head, { body, untilClose = false, timeoutMs = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let buf = Buffer.alloc(0);
    let parsed = null;
    let done = false;
    const finish = (err) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) return reject(err);
      if (!parsed) parsed = parseHead(buf);
      if (!parsed) return reject(new Error(`no complete response head; got ${JSON.stringify(buf.toString("latin1"))}`));
      const bodyBuf = buf.subarray(parsed.bodyStart);
      resolve({
        status: parsed.status,
        headers: parsed.headers,
        header: (n) => parsed.headers[n.toLowerCase()]?.[0] ?? null,
        body: bodyBuf,
        text: bodyBuf.toString("utf8"),
      });
    };
    const timer = setTimeout(() => finish(new Error(`raw request timed out after ${timeoutMs} ms; got ${JSON.stringify(buf.toString("latin1").slice(0, 500))}`)), timeoutMs);
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      if (!parsed) parsed = parseHead(buf);
      if (parsed && !untilClose) {
        const cl = Number(parsed.headers["content-length"]?.[0] ?? "NaN");
        if (Number.isFinite(cl) && buf.length - parsed.bodyStart >= cl) {
          buf = buf.subarray(0, parsed.bodyStart + cl);
          finish();
        }
      }
    });
    sock.on("end", () => finish());
    sock.on("close", () => finish());
    sock.on("error", (e) => (parsed || buf.length ? finish() : finish(e)));
    sock.write(head + "\r\n\r\n");
    if (body !== undefined) sock.write(body);
  });
}

// Converts a raw() answer into the shape assertError() expects.
export function rawAsResponse(r) {
  return { status: r.status, headers: { get: (n) => r.header(n) }, body: r.body, text: r.text };
}

// ---------------------------------------------------------------------------
// SSE: opens a live=sse read and parses events as they arrive.

export class SseReader {
  constructor(url, { headers = {}, timeoutMs = 20000 } = {}) {
    this.url = url;
    this.headers = headers;
    this.events = []; // {type, data, lines}
    this.ended = false;
    this.waiters = [];
    this.ctrl = new AbortController();
    this.hardTimer = setTimeout(() => this.ctrl.abort(), timeoutMs);
  }

  async open() {
    this.res = await fetch(this.url, { headers: this.headers, signal: this.ctrl.signal });
    this.status = this.res.status;
    if (this.status !== 200) {
      this.text = await this.res.text();
      this.ended = true;
      clearTimeout(this.hardTimer);
      return this;
    }
    this.pump = this.#pump();
    return this;
  }

  async #pump() {
    const decoder = new TextDecoder();
    let pending = "";
    let type = null;
    let lines = [];
    try {
      for await (const chunk of this.res.body) {
        pending += decoder.decode(chunk, { stream: true });
        let m;
        while ((m = /\r\n|\n|\r/.exec(pending)) !== null) {
          // A lone CR at the very end may be the first half of CRLF.
          if (m[0] === "\r" && m.index === pending.length - 1) break;
          const line = pending.slice(0, m.index);
          pending = pending.slice(m.index + m[0].length);
          if (line === "") {
            if (type !== null || lines.length) {
              this.events.push({ type: type ?? "message", data: lines.join("\n"), lines });
              this.#notify();
            }
            type = null;
            lines = [];
            continue;
          }
          if (line.startsWith(":")) continue;
          const i = line.indexOf(":");
          const field = i < 0 ? line : line.slice(0, i);
          let value = i < 0 ? "" : line.slice(i + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (field === "event") type = value;
          else if (field === "data") lines.push(value);
        }
      }
    } catch {
      // aborted or reset: treated as the end
    }
    this.ended = true;
    clearTimeout(this.hardTimer);
    this.#notify();
  }

  #notify() {
    for (const w of this.waiters.splice(0)) w();
  }

  // Waits until pred(events) is true or the stream ends or timeoutMs passes.
  async waitFor(pred, timeoutMs = 5000) {
    const deadline = Date.now() + timeoutMs;
    while (!pred(this.events)) {
      if (this.ended) return pred(this.events);
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return true;
  }

  // Waits for the server to end the response (bounded).
  async waitEnd(timeoutMs = 5000) {
    return this.waitFor(() => this.ended, timeoutMs) || this.ended;
  }

  close() {
    clearTimeout(this.hardTimer);
    this.ctrl.abort();
  }

  get controls() {
    return this.events.filter((e) => e.type === "control").map((e) => JSON.parse(e.data));
  }
}

export async function openSse(url, opts) {
  return new SseReader(url, opts).open();
}
