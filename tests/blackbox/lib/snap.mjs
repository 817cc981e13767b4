// Helpers for the snapshot, bootstrap, retention and immutable-read
// black-box tests (extensions.txt §2-§4): the snapshot digest computed
// independently with the b3sum CLI, stream creation, offsets learned from
// the server (never constructed), and streamed request bodies.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import { assertToken, get, head, put, req } from "./bucket.mjs";

export const MiB = 1024 * 1024;
export const CHUNK = 4 * MiB; // the server's chunk grid (§4.2)
export const MAX_SNAPSHOT_BYTES = 1073741824; // the server's Ursula-Max-Snapshot-Bytes

// The input of the snapshot digest: the content type's length as a
// little-endian u64, the content type, then the body.
function digestPrefix(type) {
  const t = Buffer.from(type, "utf8");
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(t.length));
  return Buffer.concat([len, t]);
}

// Lowercase hex BLAKE3 of (u64le(len(type)), type, body), via b3sum.
export function snapshotDigest(type, body) {
  const r = spawnSync("b3sum", ["--no-names"], {
    input: Buffer.concat([digestPrefix(type), Buffer.from(body)]),
    maxBuffer: 1 << 20,
  });
  if (r.status !== 0) throw new Error(`b3sum failed: ${r.stderr}`);
  return r.stdout.toString().trim();
}

// The same digest over a list of buffers, streamed into b3sum (for bodies
// of hundreds of MiB).
export function snapshotDigestOf(type, buffers) {
  return new Promise((resolve, reject) => {
    const p = spawn("b3sum", ["--no-names"], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    p.on("error", reject);
    p.on("exit", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`b3sum exited ${code}: ${err}`))));
    (async () => {
      for (const b of [digestPrefix(type), ...buffers]) {
        if (!p.stdin.write(b)) await new Promise((r) => p.stdin.once("drain", r));
      }
      p.stdin.end();
    })().catch(reject);
  });
}

export const sha256 = (...bufs) => {
  const h = crypto.createHash("sha256");
  for (const b of bufs) h.update(b);
  return h.digest("hex");
};

// Deterministic pseudo-random bytes (fast: AES-CTR keystream of a seed).
export function pseudoRandom(n, seed = "seed") {
  const key = crypto.createHash("sha256").update(String(seed)).digest();
  const c = crypto.createCipheriv("aes-256-ctr", key, Buffer.alloc(16));
  return Buffer.concat([c.update(Buffer.alloc(n)), c.final()]);
}

export const tok = (r) => r.headers.get("stream-incarnation");
export const h = (r, name) => r.headers.get(name);

// Creates a stream; returns {url, token, tail}.
export async function createStream(url, { type = "application/octet-stream", body, headers = {} } = {}) {
  const r = await put(url, { type, body, headers });
  assert.equal(r.status, 201, `create ${url} answered ${r.status} ${r.text}`);
  return { url, token: assertToken(tok(r)), tail: r.headers.get("stream-next-offset") };
}

// Appends; returns the new tail.
export async function append(url, body, type = "application/octet-stream", headers = {}) {
  const r = await req(url, { method: "POST", headers: { "content-type": type, ...headers }, body });
  assert.ok(r.status === 204 || r.status === 200, `append answered ${r.status} ${r.text}`);
  const next = r.headers.get("stream-next-offset");
  assert.ok(next, "append answers Stream-Next-Offset");
  return next;
}

// The offset after the first `n` bytes from `from` (a max_bytes read).
// For a JSON stream the bytes are those of the NDJSON view (§9.4).
// Reads in steps (a response may hold fewer bytes than asked, §9.3).
export async function offsetAfter(url, n, from) {
  let cur = from ?? (await head(url)).headers.get("stream-retained-offset");
  let rem = n;
  while (rem > 0) {
    const r = await get(`${url}?offset=${encodeURIComponent(cur)}&max_bytes=${rem}`);
    assert.equal(r.status, 200, `read answered ${r.status} ${r.text}`);
    assert.ok(r.body.length > 0 && r.body.length <= rem, `a max_bytes=${rem} read returned ${r.body.length} bytes`);
    rem -= r.body.length;
    cur = r.headers.get("stream-next-offset");
  }
  return cur;
}

// Reads the stream's bytes in [from, to) with ordinary catch-up reads.
export async function readRange(url, from, to, { maxPages = 1000 } = {}) {
  const chunks = [];
  let off = from;
  for (let i = 0; i < maxPages && off !== to; i++) {
    const r = await get(`${url}?offset=${encodeURIComponent(off)}`);
    assert.equal(r.status, 200, `read at ${off} answered ${r.status} ${r.text}`);
    const next = r.headers.get("stream-next-offset");
    chunks.push(r.body);
    if (next === off) break;
    off = next;
  }
  return { body: Buffer.concat(chunks), end: off };
}

export function enc(offset) {
  return encodeURIComponent(offset);
}

// PUT a snapshot. type null sends no Content-Type (the body must then be a
// Buffer, so that fetch adds none either).
export function publish(url, offset, body, { type = "application/octet-stream", headers = {} } = {}) {
  const hs = { ...headers };
  if (type !== null) hs["content-type"] = type;
  return req(`${url}/snapshot/${enc(offset)}`, { method: "PUT", headers: hs, body: Buffer.from(body), timeoutMs: 120000 });
}

export async function publishOk(url, offset, body, opts = {}) {
  const r = await publish(url, offset, body, opts);
  assert.equal(r.status, 204, `publish at ${offset} answered ${r.status} ${r.text}`);
  const d = r.headers.get("stream-snapshot-digest");
  assert.match(d ?? "", /^[0-9a-f]{64}$/, "a publish answers Stream-Snapshot-Digest");
  return d;
}

// A request body streamed from a list of buffers in slices (fetch needs
// duplex "half" for a stream body). Optional `pauseAfter` bytes: the
// stream then awaits `gate` before sending the rest.
export function streamBody(buffers, { slice = 1 << 20, pauseAfter = -1, gate } = {}) {
  let sent = 0;
  let bi = 0;
  let off = 0;
  let paused = false;
  return new ReadableStream({
    async pull(ctrl) {
      if (!paused && pauseAfter >= 0 && sent >= pauseAfter && gate) {
        paused = true;
        await gate;
      }
      while (bi < buffers.length && off >= buffers[bi].length) {
        bi++;
        off = 0;
      }
      if (bi >= buffers.length) return ctrl.close();
      let n = Math.min(slice, buffers[bi].length - off);
      if (pauseAfter >= 0 && !paused && sent < pauseAfter) n = Math.min(n, pauseAfter - sent);
      ctrl.enqueue(new Uint8Array(buffers[bi].buffer, buffers[bi].byteOffset + off, n));
      off += n;
      sent += n;
    },
  });
}

// A request with a streamed body; returns the answer with its body read.
export async function reqStream(url, { method = "PUT", headers = {}, buffers, timeoutMs = 300000, ...opts }) {
  const length = buffers.reduce((s, b) => s + b.length, 0);
  const res = await fetch(url, {
    method,
    headers: { "content-length": String(length), ...headers },
    body: streamBody(buffers, opts),
    duplex: "half",
    signal: AbortSignal.timeout(timeoutMs),
  });
  const buf = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, body: buf, text: buf.toString("utf8"), res };
}

// Stages one part; returns its id.
export async function stagePart(url, offset, body, headers = {}) {
  const r = await req(`${url}/snapshot/${enc(offset)}/parts`, {
    method: "POST",
    headers: { "content-type": "application/octet-stream", ...headers },
    body: Buffer.from(body),
    timeoutMs: 120000,
  });
  assert.equal(r.status, 201, `staging a part answered ${r.status} ${r.text}`);
  const id = r.headers.get("stream-snapshot-part");
  assert.match(id ?? "", /^[\x21-\x7e]{1,64}$/, `Stream-Snapshot-Part is 1-64 visible ASCII: ${id}`);
  return id;
}

// Commits parts: PUT snapshot/{offset} with Stream-Snapshot-Parts and
// Stream-Snapshot-Digest, the body listing the ids, each LF-terminated.
export function commit(url, offset, ids, digest, { type = "application/octet-stream", count = ids.length, body, headers = {} } = {}) {
  const hs = { "stream-snapshot-parts": String(count), "stream-snapshot-digest": digest, ...headers };
  if (type !== null) hs["content-type"] = type;
  return req(`${url}/snapshot/${enc(offset)}`, {
    method: "PUT",
    headers: hs,
    body: Buffer.from(body ?? ids.map((i) => `${i}\n`).join("")),
    timeoutMs: 300000,
  });
}

// Reads a whole GET body, hashing it as it arrives (for large snapshots).
export async function getHashed(url, headers = {}, timeoutMs = 300000) {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) });
  const hash = crypto.createHash("sha256");
  let length = 0;
  for await (const c of res.body) {
    hash.update(c);
    length += c.length;
  }
  return { status: res.status, headers: res.headers, length, sha256: hash.digest("hex") };
}

// Asserts the absence of each named header.
export function assertAbsent(r, names, what = "") {
  for (const n of names) assert.equal(r.headers.get(n), null, `${what} carries no ${n}`);
}

// Stops the servers and removes their data directories at once (these tests
// write hundreds of MiB; the Server helper removes its directories only when
// the test file's process exits).
export async function stopAndRemove(...servers) {
  for (const s of servers) {
    await s.stop();
    fs.rmSync(s.dataDir, { recursive: true, force: true });
  }
}
