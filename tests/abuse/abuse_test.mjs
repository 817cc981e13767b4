#!/usr/bin/env node
// abuse_test.mjs - abusive clients against one server with short limits,
// while a probe client keeps working.
//
// WHAT IT PROVES (limits set by flags so it runs fast: request timeout 1 s,
// idle timeout 1 s, 200 connections, 8 KiB of request line + headers, 32
// headers, 1 MiB bodies, 4 MiB of bodies in flight, 50 live reads, 20 per
// stream, 64 MiB per read answer, 64 MiB of answers held for clients):
//   slowloris        headers dribbled a byte per 100 ms: 408 and close within
//                    the request timeout (+ slack)
//   slow body        a body dribbled: 408 and close in time, nothing applied;
//                    a steady upload at 320 KiB/s (above --min-body-rate)
//                    that outlasts the request timeout is applied
//   idle flood       connections that send nothing are closed at the idle
//                    timeout; past --max-connections they are closed at accept
//   smuggling        Content-Length with Transfer-Encoding (both orders),
//                    two differing Content-Lengths, obfuscated chunked,
//                    chunked not last: 400 and close, exactly one answer, and
//                    the request hidden in the body is never executed
//   chunk sizes      a chunk size that overflows: 400; a chunk past the body
//                    limit: 413 and close; nothing applied
//   header floods    too many headers, one huge header: 431; a huge request
//                    line: 414; many at once
//   garbage          garbage after a valid request: the request answered, then
//                    400 and close; garbage alone: 400 and close; a pipeline
//                    of 100 requests then garbage: 100 answers then 400
//   unread answers   60 pipelined 1 MiB reads whose answers are not read:
//                    the server holds about one answer (RSS grows <= 16 MiB),
//                    and all 60 arrive whole once the client reads
//   stalled download a 48 MiB answer (far past the socket buffers), a
//                    catch-up read and a snapshot, both read and sent a piece
//                    at a time, to a client that stops reading: cut (resumed after two idle
//                    periods + slack, it gets the end of the connection
//                    before the whole answer); a client reading 64 KiB every
//                    10 ms keeps its connection through four periods, then
//                    gets every byte
//   answer memory    24 unread 48 MiB catch-up reads, each read and sent a
//                    512 KiB piece at a time: the server holds at most a
//                    piece per answer (runnel_answer_bytes_in_flight) and
//                    its RSS grows by a few pieces, not 24 answers (at
//                    most 24 pieces plus --rss-slack-mib); every
//                    answer is whole (48 MiB of correct bytes, Stream-Next-
//                    Offset at the tail, Stream-Up-To-Date); once taken, a
//                    read is whole again
//   body memory      bodies declared past the in-flight bound: 503
//                    INGRESS_BODY_BYTES_LIMIT_REACHED with Retry-After,
//                    unread; bodies under 64 KiB pass on a reserve of an
//                    eighth; the budget returns when the holders time out
//   live reads       past the per-stream bound and past the global bound
//                    503 LIVE_READ_BACKPRESSURE with Retry-After (the
//                    server's code: LIVE_READS_EXHAUSTED is an
//                    intermediary's, extensions §11); a long-poll that can answer at once is
//                    not refused; capacity returns when they are answered
//   probe            during every attack a client on its own keep-alive
//                    connection alternates a catch-up read and an append:
//                    every probe request must succeed, and the p99 latency
//                    over each attack must stay within --p99-ms (default 200
//                    ms; the sanitizer build is given 2000 ms: see tests/suites.cmake).
//
// OUTPUT: "FAIL ..." lines, "# ..." figures, last line "N passed, M failed".
import http from "node:http";
import net from "node:net";
import path from "node:path";
import fs from "node:fs";
import { Worker } from "node:worker_threads";
import { Checks, Server, percentile, parseArgs, readAll, tempDir, sleep } from "../faults/lib.mjs";
import { commit, createStream, enc, snapshotDigestOf, stagePart } from "../blackbox/lib/snap.mjs";

const OCTET = "application/octet-stream";

const USAGE = "usage: node tests/abuse/abuse_test.mjs --bin build/runnel [--p99-ms 200] [--rss-slack-mib 20]";
const opts = parseArgs(process.argv.slice(2), { bin: "build/runnel", p99Ms: 200, rssSlackMib: 20 }, USAGE);
const checks = new Checks();

const LIMITS = {
  requestTimeoutMs: 1000, idleTimeoutMs: 1000, maxConnections: 200, maxHeaderBytes: 8192, maxHeaders: 32,
  maxBodyBytes: 1 << 20, inFlight: 4 << 20, liveReads: 50, liveReadsPerStream: 20, maxReadBytes: 64 << 20,
  answersInFlight: 64 << 20,
};
const SLACK_MS = 700; // timer granularity, scheduling on 2 cores, sanitizer builds

// ---------------------------------------------------------------- raw connections

// A raw TCP client: collects everything received and when the server closed.
class Raw {
  constructor(port) {
    this.data = "";
    this.closedAt = null;
    this.openedAt = Date.now();
    this.error = null;
    this.sock = net.connect(port, "127.0.0.1");
    this.sock.setNoDelay(true);
    this.sock.on("data", (d) => { this.data += d.toString("latin1"); });
    this.sock.on("error", (e) => { this.error = e.code; });
    this.sock.on("close", () => { this.closedAt = Date.now(); });
    this.connected = new Promise((r) => { this.sock.once("connect", r); this.sock.once("close", r); });
  }
  send(s) { if (!this.sock.destroyed) this.sock.write(typeof s === "string" ? Buffer.from(s, "latin1") : s); }
  statuses() { return [...this.data.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1])); }
  async closed(ms) {
    const t0 = Date.now();
    while (this.closedAt === null && Date.now() - t0 < ms) await sleep(10);
    return this.closedAt !== null;
  }
  destroy() { this.sock.destroy(); }
}

// Unread answers taken on a worker thread, so that swallowing them (24 x
// 48 MiB) never holds up the main thread, whose probe measures the server:
// the worker opens `count` connections, asks each for `path` and leaves the
// answers unread (posting "sent"); on "resume" it reads them all, checking
// every body byte against `byte` as it arrives without keeping it, and
// posts each answer's head, status, Content-Length, body bytes received
// and how many received pieces held any other byte ("wrong").
const UNREAD_ANSWERS_WORKER = `
import net from "node:net";
import { parentPort, workerData } from "node:worker_threads";
const { port, path, count, byte } = workerData;
const expected = Buffer.alloc(1 << 20, byte); // compared natively, a slice at a time
const readers = [];
for (let i = 0; i < count; i++) {
  const r = { head: null, status: 0, length: -1, bodyBytes: 0, wrong: 0, closed: false, raw: Buffer.alloc(0) };
  r.done = () => r.head !== null && r.bodyBytes >= r.length;
  r.sock = net.connect(port, "127.0.0.1");
  r.sock.pause();
  r.sock.on("error", () => {});
  r.sock.on("close", () => { r.closed = true; });
  r.sock.on("data", (d) => {
    if (r.head === null) {
      r.raw = Buffer.concat([r.raw, d]);
      const end = r.raw.indexOf("\\r\\n\\r\\n");
      if (end < 0) return;
      r.head = r.raw.subarray(0, end).toString("latin1");
      r.status = Number(r.head.slice(9, 12));
      r.length = Number(/\\r\\ncontent-length: (\\d+)/i.exec(r.head)?.[1] ?? NaN);
      d = r.raw.subarray(end + 4);
      r.raw = null;
    }
    for (let at = 0; at < d.length; at += expected.length) {
      const part = d.subarray(at, at + expected.length);
      if (!part.equals(expected.subarray(0, part.length))) r.wrong++;
    }
    r.bodyBytes += d.length;
  });
  r.sock.write("GET " + path + " HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n");
  readers.push(r);
}
parentPort.postMessage("sent");
parentPort.once("message", async () => {
  for (const r of readers) r.sock.resume();
  const t0 = Date.now();
  while (readers.some((r) => !r.done() && !r.closed) && Date.now() - t0 < 30000) await new Promise((ok) => setTimeout(ok, 20));
  parentPort.postMessage(readers.map((r) => ({ head: r.head, status: r.status, length: r.length, bodyBytes: r.bodyBytes, wrong: r.wrong, done: r.done() })));
  for (const r of readers) r.sock.destroy();
});
`;

// Sends `text` as one piece and waits for the server to close (bounded).
async function oneShot(port, text, waitMs = 3000) {
  const c = new Raw(port);
  await c.connected;
  c.send(text);
  const closed = await c.closed(waitMs);
  c.destroy();
  return { statuses: c.statuses(), closed, data: c.data };
}

// ---------------------------------------------------------------- the probe

class Probe {
  constructor(srv) {
    this.srv = srv;
    this.agent = null;
    this.lat = [];
    this.errors = [];
    this.running = false;
    this.n = 0;
  }
  request(method, p, body) {
    return new Promise((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port: this.srv.port, method, path: p, agent: this.agent,
        headers: body ? { "content-type": "text/plain", "content-length": Buffer.byteLength(body) } : {} }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      });
      req.setTimeout(5000, () => req.destroy(new Error("probe timeout")));
      req.on("error", reject);
      if (body) req.write(body);
      req.end();
    });
  }
  // A fresh keep-alive connection per attack: between attacks the old one
  // idles past the server's idle timeout while this process may be busy
  // checking (hashing 1.1 GiB of answers), and reusing a connection the
  // server closed meanwhile fails with "socket hang up" before any request
  // of the attack reached the server.
  start() {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    this.running = true;
    this.lat = [];
    this.loop = (async () => {
      while (this.running) {
        const append = this.n++ % 2 === 1;
        const t0 = performance.now();
        try {
          const st = append ? await this.request("POST", "/v1/stream/abuse/probe", `p${this.n};`)
            : await this.request("GET", "/v1/stream/abuse/probe?offset=-1");
          if (st !== (append ? 204 : 200)) this.errors.push(`${append ? "append" : "read"} answered ${st}`);
        } catch (e) {
          this.errors.push(`${append ? "append" : "read"}: ${e.message}`);
        }
        this.lat.push(performance.now() - t0);
        await sleep(20);
      }
    })();
  }
  async stop() {
    this.running = false;
    await this.loop;
    this.agent.destroy();
    const s = this.lat.slice().sort((a, b) => a - b);
    return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), max: s[s.length - 1] ?? 0, errors: this.errors.splice(0) };
  }
}

const figures = [];
// attack(name, fn): runs fn with the probe running; checks the probe.
async function attack(name, probe, fn) {
  probe.start();
  await sleep(60);
  try {
    await fn();
  } catch (e) {
    checks.check(`${name}: ran`, false, e.stack);
  }
  const p = await probe.stop();
  figures.push(`${name}: probe ${p.n} requests, p50 ${p.p50.toFixed(1)} ms, p99 ${p.p99.toFixed(1)} ms, max ${p.max.toFixed(1)} ms`);
  checks.check(`${name}: probe requests all succeed`, p.errors, "");
  checks.check(`${name}: probe p99 ${p.p99.toFixed(1)} ms <= ${opts.p99Ms} ms`, p.p99 <= opts.p99Ms, `p99 ${p.p99.toFixed(1)} ms (max ${p.max.toFixed(1)})`);
  return p;
}

// ---------------------------------------------------------------- attacks

const H = (lines) => lines.join("\r\n") + "\r\n\r\n";

async function main() {
  const t0 = Date.now();
  const root = tempDir("runnel-abuse-", { fast: true, keep: true });
  const srv = new Server({
    bin: opts.bin, dataDir: path.join(root, "data"), logPath: path.join(root, "server.log"),
    args: ["--request-timeout-ms", String(LIMITS.requestTimeoutMs), "--idle-timeout-ms", String(LIMITS.idleTimeoutMs),
      "--max-connections", String(LIMITS.maxConnections), "--max-header-bytes", String(LIMITS.maxHeaderBytes),
      // a body limit below the protocol's 32 MiB is a test setting (--test-hooks)
      "--max-headers", String(LIMITS.maxHeaders), "--test-hooks", "--max-body-bytes", String(LIMITS.maxBodyBytes),
      "--max-body-bytes-in-flight", String(LIMITS.inFlight), "--max-live-reads", String(LIMITS.liveReads),
      "--max-live-reads-per-stream", String(LIMITS.liveReadsPerStream), "--long-poll-timeout-ms", "4000",
      "--max-read-bytes", String(LIMITS.maxReadBytes), "--max-answer-bytes-in-flight", String(LIMITS.answersInFlight)],
  });
  const port = () => srv.port;
  const base = () => srv.url;
  const streamContent = async (name) => (await readAll(`${base()}/v1/stream/abuse/${name}`)).body.toString("latin1");
  try {
    await srv.start();
    for (const s of ["probe", "target", "smuggle", "chunks", "bodies", "lp0", "lp1", "lp2", "lp3", "lp4"]) {
      const r = await fetch(`${base()}/v1/stream/abuse/${s}`, { method: "PUT", headers: { "content-type": "text/plain" } });
      if (r.status !== 201) throw new Error(`create ${s}: ${r.status}`);
    }
    const probe = new Probe(srv);

    await attack("slowloris", probe, async () => {
      const conns = [];
      for (let i = 0; i < 50; i++) {
        const c = new Raw(port());
        conns.push(c);
      }
      await Promise.all(conns.map((c) => c.connected));
      const header = "GET /v1/stream/abuse/target?offset=-1 HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(200);
      const start = Date.now();
      for (let k = 0; k < header.length && Date.now() - start < LIMITS.requestTimeoutMs + SLACK_MS + 500; k++) {
        for (const c of conns) c.send(header[k]);
        await sleep(100);
        if (conns.every((c) => c.closedAt !== null)) break;
      }
      await Promise.all(conns.map((c) => c.closed(SLACK_MS)));
      const late = conns.filter((c) => c.closedAt === null || c.closedAt - start > LIMITS.requestTimeoutMs + SLACK_MS);
      const not408 = conns.filter((c) => !(c.statuses().length === 1 && c.statuses()[0] === 408));
      checks.check("slowloris: 50 dribbling connections closed within the request timeout", late.length === 0,
        `${late.length} closed late or not at all`);
      checks.check("slowloris: each answered 408 once", not408.length === 0, `${not408.length} not: ${not408[0]?.data.slice(0, 80)}`);
      conns.forEach((c) => c.destroy());
    });

    await attack("slow body", probe, async () => {
      const conns = [];
      for (let i = 0; i < 20; i++) {
        const c = new Raw(port());
        conns.push(c);
      }
      await Promise.all(conns.map((c) => c.connected));
      const start = Date.now();
      for (const c of conns) c.send(H(["POST /v1/stream/abuse/bodies HTTP/1.1", "Host: x", "Content-Type: text/plain", "Content-Length: 1000"]));
      while (Date.now() - start < LIMITS.requestTimeoutMs + SLACK_MS && conns.some((c) => c.closedAt === null)) {
        for (const c of conns) c.send("SLOWBODY!!");
        await sleep(100);
      }
      await Promise.all(conns.map((c) => c.closed(SLACK_MS)));
      const late = conns.filter((c) => c.closedAt === null || c.closedAt - start > LIMITS.requestTimeoutMs + SLACK_MS);
      checks.check("slow body: 20 dribbled bodies cut within the request timeout", late.length === 0, `${late.length} late`);
      checks.check("slow body: each answered 408", conns.every((c) => c.statuses().join() === "408"), conns.map((c) => c.statuses().join()).join(" "));
      checks.check("slow body: nothing applied", (await streamContent("bodies")) === "", "bodies stream not empty");
      conns.forEach((c) => c.destroy());

      // a steady upload slower than the request timeout allows for its size
      // but faster than --min-body-rate (64 KiB/s): 1 MiB at 320 KiB/s
      const put = await fetch(`${base()}/v1/stream/abuse/steady`, { method: "PUT", headers: { "content-type": "text/plain" } });
      checks.check("slow body: the steady upload's stream is created", put.status === 201, String(put.status));
      const body = Buffer.alloc(LIMITS.maxBodyBytes, 0x73);
      const up = new Raw(port());
      await up.connected;
      const t0 = Date.now();
      up.send(H(["POST /v1/stream/abuse/steady HTTP/1.1", "Host: x", "Content-Type: text/plain", `Content-Length: ${body.length}`]));
      for (let off = 0; off < body.length && up.closedAt === null; off += 64 << 10) {
        up.send(body.subarray(off, off + (64 << 10)));
        await sleep(200);
      }
      const took = Date.now() - t0;
      const t1 = Date.now();
      while (up.statuses().length === 0 && up.closedAt === null && Date.now() - t1 < 3000) await sleep(20);
      checks.check(`slow body: a steady 320 KiB/s upload taking ${took} ms (> 3 request timeouts) is applied`,
        took > 3 * LIMITS.requestTimeoutMs && up.statuses().join() === "204" && (await streamContent("steady")) === body.toString("latin1"),
        `answers ${up.statuses().join() || "none"}${up.closedAt === null ? "" : ", closed"}`);
      up.destroy();
    });

    await attack("idle flood", probe, async () => {
      const n = LIMITS.maxConnections - 20;
      const idle = [];
      for (let i = 0; i < n; i++) idle.push(new Raw(port()));
      await Promise.all(idle.map((c) => c.connected));
      const start = Date.now();
      await sleep(100);
      // past the cap: closed at accept, no answer
      const extra = [];
      for (let i = 0; i < 60; i++) extra.push(new Raw(port()));
      await Promise.all(extra.map((c) => c.connected));
      await sleep(300);
      const closedAtAccept = extra.filter((c) => c.closedAt !== null && c.data === "");
      checks.check("idle flood: connections past --max-connections are closed at accept", closedAtAccept.length >= 60 - 20,
        `${closedAtAccept.length} of 60 closed (cap ${LIMITS.maxConnections}, ${n} idle + probe open)`);
      await Promise.all([...idle, ...extra].map((c) => c.closed(LIMITS.idleTimeoutMs + SLACK_MS + 500)));
      const late = idle.filter((c) => c.closedAt === null || c.closedAt - start > LIMITS.idleTimeoutMs + SLACK_MS);
      checks.check(`idle flood: ${n} idle connections closed at the idle timeout`, late.length === 0, `${late.length} late`);
      checks.check("idle flood: no answer was sent to idle connections", idle.every((c) => c.data === ""));
      [...idle, ...extra].forEach((c) => c.destroy());
      // capacity is back
      const r = await fetch(`${base()}/v1/stream/abuse/probe?offset=-1`);
      checks.check("idle flood: new connections are served afterwards", r.status === 200, String(r.status));
    });

    await attack("request smuggling", probe, async () => {
      const hidden = H(["POST /v1/stream/abuse/smuggle HTTP/1.1", "Host: x", "Content-Type: text/plain", "Content-Length: 8"]) + "SMUGGLED";
      const variants = {
        "CL then TE": ["Content-Length: 5", "Transfer-Encoding: chunked"],
        "TE then CL": ["Transfer-Encoding: chunked", "Content-Length: 5"],
        "two Content-Lengths": ["Content-Length: 5", "Content-Length: 200"],
        "TE chunked not last": ["Transfer-Encoding: chunked, identity", "Content-Length: 5"],
        "TE obfuscated": ["Transfer-Encoding: xchunked", "Content-Length: 5"],
        "TE with space before colon": ["Transfer-Encoding : chunked", "Content-Length: 5"],
        "CL with sign": ["Content-Length: +5"],
      };
      for (const [name, hdrs] of Object.entries(variants)) {
        const req = H(["POST /v1/stream/abuse/smuggle HTTP/1.1", "Host: x", "Content-Type: text/plain", ...hdrs]) + "0\r\n\r\n" + hidden;
        const r = await oneShot(port(), req);
        checks.check(`smuggling (${name}): one answer, 400, connection closed`, r.closed && r.statuses.length === 1 && r.statuses[0] === 400,
          `statuses ${r.statuses.join(",")}, closed ${r.closed}`);
      }
      await sleep(200);
      const content = await streamContent("smuggle");
      checks.check("smuggling: the hidden request was never executed, nothing appended", content === "", JSON.stringify(content.slice(0, 80)));
    });

    await attack("chunk sizes", probe, async () => {
      const head = H(["POST /v1/stream/abuse/chunks HTTP/1.1", "Host: x", "Content-Type: text/plain", "Transfer-Encoding: chunked"]);
      let r = await oneShot(port(), head + "FFFFFFFFFFFFFFFFFFFF\r\nabc\r\n0\r\n\r\n");
      checks.check("chunk sizes: an overflowing chunk size answers 400 and closes", r.closed && r.statuses.join() === "400", `${r.statuses} closed ${r.closed}`);
      // a chunk past the body limit: 413 before it is read
      const c = new Raw(port());
      await c.connected;
      c.send(head + (LIMITS.maxBodyBytes * 2).toString(16) + "\r\n");
      const piece = Buffer.alloc(64 * 1024, 0x41);
      for (let i = 0; i < 40 && c.closedAt === null; i++) { c.send(piece); await sleep(5); }
      await c.closed(LIMITS.requestTimeoutMs + SLACK_MS);
      checks.check("chunk sizes: a chunk past the body limit answers 413 and closes", c.closedAt !== null && c.statuses().join() === "413", `${c.statuses()} closed ${c.closedAt !== null}`);
      c.destroy();
      r = await oneShot(port(), head + "zz\r\nabc\r\n0\r\n\r\n");
      checks.check("chunk sizes: a non-hex chunk size answers 400 and closes", r.closed && r.statuses.join() === "400", `${r.statuses} closed ${r.closed}`);
      checks.check("chunk sizes: nothing applied", (await streamContent("chunks")) === "");
    });

    await attack("header floods", probe, async () => {
      const many = Array.from({ length: LIMITS.maxHeaders + 10 }, (_, i) => `X-H${i}: v`);
      let r = await oneShot(port(), H(["GET /v1/stream/abuse/target?offset=-1 HTTP/1.1", "Host: x", ...many]));
      checks.check("header floods: too many headers answer 431 and close", r.closed && r.statuses.join() === "431", `${r.statuses} closed ${r.closed}`);
      r = await oneShot(port(), H(["GET /v1/stream/abuse/target?offset=-1 HTTP/1.1", "Host: x", `X-Big: ${"b".repeat(LIMITS.maxHeaderBytes + 100)}`]));
      checks.check("header floods: a header past the byte limit answers 431 and closes", r.closed && r.statuses.join() === "431", `${r.statuses} closed ${r.closed}`);
      r = await oneShot(port(), H([`GET /v1/stream/abuse/${"u".repeat(LIMITS.maxHeaderBytes + 100)} HTTP/1.1`, "Host: x"]));
      checks.check("header floods: a request line past the limit answers 414 and closes", r.closed && r.statuses.join() === "414", `${r.statuses} closed ${r.closed}`);
      // endless headers, streamed: cut once past the limit
      const c = new Raw(port());
      await c.connected;
      c.send("GET / HTTP/1.1\r\n");
      for (let i = 0; i < 2000 && c.closedAt === null; i++) { c.send(`X-Flood-${i}: ${"f".repeat(50)}\r\n`); if (i % 50 === 0) await sleep(1); }
      await c.closed(2000);
      checks.check("header floods: an endless header stream is cut with 431", c.closedAt !== null && c.statuses().join() === "431", `${c.statuses()} closed ${c.closedAt !== null}`);
      c.destroy();
      const rs = await Promise.all(Array.from({ length: 30 }, () => oneShot(port(), H(["GET / HTTP/1.1", "Host: x", ...many]))));
      checks.check("header floods: 30 at once all answered 431", rs.every((x) => x.statuses.join() === "431" && x.closed));
    });

    await attack("pipelined garbage", probe, async () => {
      const get = H(["GET /v1/stream/abuse/probe?offset=-1 HTTP/1.1", "Host: x"]);
      let r = await oneShot(port(), get + "\x00\x01\x02GARBAGE \xff\r\n\r\n");
      checks.check("garbage: a valid request then garbage: 200 then 400, closed", r.closed && r.statuses.join() === "200,400", `${r.statuses} closed ${r.closed}`);
      r = await oneShot(port(), "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage-tls-hello\r\n\r\n");
      checks.check("garbage: garbage alone: 400, closed", r.closed && r.statuses.join() === "400", `${r.statuses} closed ${r.closed}`);
      r = await oneShot(port(), get.repeat(100) + "NOT HTTP AT ALL\r\n\r\n", 5000);
      checks.check("garbage: 100 pipelined requests then garbage: 100 answers then 400, closed",
        r.closed && r.statuses.length === 101 && r.statuses.slice(0, 100).every((s) => s === 200) && r.statuses[100] === 400,
        `${r.statuses.length} answers, last ${r.statuses.slice(-2)}, closed ${r.closed}`);
      r = await oneShot(port(), "GET /v1/stream/abuse/probe?offset=-1 HTTP/9.9\r\nHost: x\r\n\r\n");
      checks.check("garbage: an unknown HTTP version: 400 or 505, closed", r.closed && [400, 505].includes(r.statuses[0]), `${r.statuses} closed ${r.closed}`);
    });

    // The answers' statuses are checked after the attack: scanning 60 MiB
    // of received text stalls this thread, which the probe shares, and the
    // probe measures the server, not this test's bookkeeping.
    let unread = null;
    await attack("unread answers", probe, async () => {
      // one connection pipelines 60 reads of a 1 MiB stream and reads none
      // of the answers for a while: the server parses the next request only
      // once the previous answer is out, so it holds about one answer
      const big = Buffer.alloc(LIMITS.maxBodyBytes, 0x61);
      const put = await fetch(`${base()}/v1/stream/abuse/big`, { method: "PUT", headers: { "content-type": "text/plain" }, body: big });
      checks.check("unread answers: the 1 MiB stream is created", put.status === 201, String(put.status));
      const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${srv.proc.pid}/status`, "utf8"))[1]);
      const before = rss();
      const c = new Raw(port());
      await c.connected;
      c.sock.pause();
      const N = 60;
      c.send(Array.from({ length: N }, () => "GET /v1/stream/abuse/big?offset=-1 HTTP/1.1\r\nHost: x\r\n\r\n").join(""));
      await sleep(500);
      const grew = rss() - before;
      checks.check(`unread answers: server RSS grew ${grew >> 10} MiB for ${N} unread 1 MiB answers (<= 16 MiB)`, grew <= 16 << 10, `${grew} KiB`);
      c.sock.resume();
      const t0 = Date.now();
      // N heads and N bodies: at least N 1 MiB bodies' worth of bytes
      while (c.data.length < N * big.length && c.closedAt === null && Date.now() - t0 < 5000) await sleep(20);
      unread = { c, N, bodyBytes: big.length };
    });
    if (unread) {
      const { c, N, bodyBytes } = unread;
      const st = c.statuses();
      checks.check(`unread answers: once read, all ${N} answers arrive, each 200 with the whole stream`,
        st.length === N && st.every((x) => x === 200) && c.data.length >= N * bodyBytes, `${st.length} answers, ${c.data.length} bytes`);
      c.destroy();
    }

    // Two kinds of answer: a catch-up read (read from the stream a piece at
    // a time) and a snapshot (sent from its file a piece at a time), each
    // 48 MiB.
    const piece = Buffer.alloc(LIMITS.maxBodyBytes, 0x62);
    const PIECES = 48;
    const downloads = {
      "catch-up": async () => {
        const url = `${base()}/v1/stream/abuse/huge`;
        const put = await fetch(url, { method: "PUT", headers: { "content-type": "text/plain" } });
        if (put.status !== 201) throw new Error(`create: ${put.status}`);
        for (let i = 0; i < PIECES; i++) {
          const r = await fetch(url, { method: "POST", headers: { "content-type": "text/plain" }, body: piece });
          if (r.status !== 204) throw new Error(`append ${i}: ${r.status}`);
        }
        return "/v1/stream/abuse/huge?offset=-1";
      },
      snapshot: async () => {
        const url = `${base()}/abuse-b/huge`;
        const { tail } = await createStream(url, { type: OCTET, body: Buffer.from("x") });
        const ids = [];
        for (let i = 0; i < PIECES; i++) ids.push(await stagePart(url, tail, piece));
        const r = await commit(url, tail, ids, await snapshotDigestOf(OCTET, Array(PIECES).fill(piece)));
        if (r.status !== 204) throw new Error(`commit: ${r.status} ${r.text}`);
        return `/abuse-b/huge/snapshot/${enc(tail)}`;
      },
    };
    for (const [kind, prepare] of Object.entries(downloads)) {
      await attack(`stalled download (${kind})`, probe, async () => {
        const target = await prepare();
        const total = PIECES * piece.length;
        const open = async () => {
          const c = new Raw(port());
          await c.connected;
          c.sock.pause();
          c.send(`GET ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
          return c;
        };
        // takes one 'data' event's bytes (at most 64 KiB), or nothing within 200 ms
        const readOnce = (c) => new Promise((resolve) => {
          const done = () => {
            clearTimeout(timer);
            c.sock.removeListener("data", done);
            c.sock.pause();
            resolve();
          };
          const timer = setTimeout(done, 200);
          c.sock.once("data", done);
          c.sock.resume();
        });
        // a paused client sees the end of the connection only once it reads
        // up to it, so the stalled one is resumed after two periods (+ slack):
        // cut, it gets less than the answer and the end; never cut, it would
        // get all of it
        // both answers are whole (48 MiB), far more than the socket
        // buffers hold
        const t0 = Date.now();
        const slow = await open();
        const stalled = await open();
        let stalledResumed = false;
        while (Date.now() - t0 < 4 * LIMITS.idleTimeoutMs && slow.closedAt === null) {
          await readOnce(slow);
          await sleep(10);
          if (!stalledResumed && Date.now() - t0 > 2 * LIMITS.idleTimeoutMs + SLACK_MS) {
            stalled.sock.resume();
            stalledResumed = true;
          }
        }
        await stalled.closed(3000);
        checks.check(`stalled download (${kind}): a client that stopped reading for two idle periods was cut`,
          stalled.closedAt !== null && stalled.data.length < total,
          `${stalled.closedAt === null ? "still open" : "closed"}, ${stalled.data.length} bytes received`);
        checks.check(`stalled download (${kind}): a slow reader keeps its connection through four idle periods, its answer unfinished`,
          slow.closedAt === null && slow.data.length < total,
          `${slow.closedAt === null ? "open" : `closed after ${slow.closedAt - t0} ms`} having read ${slow.data.length} bytes`);
        const readSoFar = slow.data.length;
        figures.push(`stalled download (${kind}): the stalled client got ${(stalled.data.length / 1048576).toFixed(1)} MiB before the cut; ` +
          `the slow one read ${(readSoFar / 1048576).toFixed(1)} MiB over four periods`);
        slow.sock.resume();
        const t1 = Date.now();
        while (slow.data.length < total && slow.closedAt === null && Date.now() - t1 < 10000) await sleep(20);
        const body = slow.data.slice(slow.data.indexOf("\r\n\r\n") + 4);
        checks.check(`stalled download (${kind}): the slow reader then gets all ${total} bytes`,
          slow.statuses()[0] === 200 && body.length === total && !/[^b]/.test(body),
          `status ${slow.statuses()[0]}, ${body.length} body bytes (${readSoFar} read slowly)`);
        stalled.destroy();
        slow.destroy();
      });
    }

    await attack("answer memory", probe, async () => {
      // the catch-up stream of the stalled-download attack: 48 MiB. A
      // catch-up answer is read and sent a piece at a time (512 KiB, one in
      // flight per answer), so 24 unread answers hold about 24 pieces, not
      // 24 answers nor the answer budget: no answer needs shortening to bound
      // memory any more, and every one is whole. (Before pieces, answers past
      // the budget were cut short, down to 64 KiB; the checks that asked for
      // that now ask for whole answers and for memory bounded by pieces.)
      const path = "/v1/stream/abuse/huge";
      const total = 48 * LIMITS.maxBodyBytes;
      const PIECE = 512 << 10; // rn_http_piece_bytes below the budget
      const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${srv.proc.pid}/status`, "utf8"))[1]) << 10;
      const before = rss();
      const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(UNREAD_ANSWERS_WORKER)}`), { workerData: { port: port(), path: `${path}?offset=-1`, count: 24, byte: 0x62 } });
      const fromWorker = () => new Promise((resolve, reject) => { worker.once("message", resolve); worker.once("error", reject); });
      await fromWorker(); // "sent"
      await sleep(300);
      const grew = rss() - before;
      // on a connection of its own: a pooled keep-alive connection may be
      // one the server's 1 s idle timeout is closing while the answers drain
      const heldGauge = () => new Promise((resolve, reject) => {
        http.get(`${base()}/__runnel/metrics`, { agent: false }, (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d) => { text += d; });
          res.on("end", () => resolve(Number(/^runnel_answer_bytes_in_flight (\d+)$/m.exec(text)?.[1])));
        }).on("error", reject);
      });
      const held = await heldGauge();
      // at most one piece (and its head) per unread answer: far below the
      // 64 MiB budget, which the unread answers no longer fill
      const heldBound = 24 * (PIECE + 4096);
      checks.check(`answer memory: runnel_answer_bytes_in_flight shows the held pieces (${held >> 10} KiB, <= ${heldBound >> 10} KiB: one piece per unread answer)`,
        held > 0 && held <= heldBound, String(held));
      const bound = 24 * PIECE + opts.rssSlackMib * 2 ** 20; // 24 pieces (12 MiB), plus the allocator's slack
      checks.check(`answer memory: server RSS grew ${grew >> 20} MiB for 24 unread 48 MiB answers (<= ${bound >> 20} MiB)`, grew <= bound, `${grew >> 20} MiB`);
      const t0 = Date.now();
      const results = fromWorker();
      worker.postMessage("resume");
      const readers = await results;
      await worker.terminate();
      const bad = [];
      readers.forEach((c, i) => {
        if (!c.done) return bad.push(`reader ${i}: no whole answer (${c.bodyBytes} of ${c.length} body bytes)`);
        const next = /\r\nstream-next-offset: (\S+)/i.exec(c.head)?.[1];
        const upToDate = /\r\nstream-up-to-date: true/i.test(c.head);
        if (c.status !== 200 || c.wrong > 0 || c.length !== total) bad.push(`reader ${i}: status ${c.status}, ${c.length} bytes, ${c.wrong} pieces with wrong bytes`);
        else if (next !== `0000000000000000_${String(total).padStart(16, "0")}`) bad.push(`reader ${i}: Stream-Next-Offset ${next} after ${c.length} bytes`);
        else if (!upToDate) bad.push(`reader ${i}: a whole answer without Stream-Up-To-Date`);
      });
      checks.check("answer memory: all 24 answers are whole: 200, 48 MiB of correct bytes, Stream-Next-Offset at the tail, Stream-Up-To-Date", bad, "");
      figures.push(`answer memory: RSS grew ${grew >> 20} MiB, ${held >> 10} KiB held for 24 unread answers; ${readers.filter((c) => c.done).length} of 24 whole after ${Date.now() - t0} ms`);
      const heldAfter = await heldGauge();
      checks.check("answer memory: runnel_answer_bytes_in_flight returns to 0 once the answers are taken", heldAfter === 0, String(heldAfter));
    });
    {
      // after the attack: taking a 48 MiB answer on this thread would stall
      // the probe, which measures the server, not this test
      const total = 48 * LIMITS.maxBodyBytes;
      const again = await fetch(`${base()}/v1/stream/abuse/huge?offset=-1`);
      const whole = Buffer.from(await again.arrayBuffer());
      checks.check("answer memory: once the answers are taken, a read is whole again", again.status === 200 && whole.length === total, `${again.status}, ${whole.length} bytes`);
    }

    await attack("body memory", probe, async () => {
      // each holder declares a 1 MiB body, sends a little and stalls
      const holders = [];
      const start = Date.now();
      for (let i = 0; i < 6; i++) {
        const c = new Raw(port());
        await c.connected;
        c.send(H(["POST /v1/stream/abuse/bodies HTTP/1.1", "Host: x", "Content-Type: text/plain", `Content-Length: ${LIMITS.maxBodyBytes}`]) + "partial");
        holders.push(c);
        await sleep(30);
      }
      await sleep(200);
      const refused = holders.filter((c) => c.statuses().join() === "503");
      const admitted = LIMITS.inFlight / LIMITS.maxBodyBytes;
      // (a probe append in flight at that moment may take a little of the
      // budget, so one more holder may be refused)
      checks.check(`body memory: past ${LIMITS.inFlight >> 20} MiB declared in flight, bodies are refused at once`,
        refused.length >= holders.length - admitted && refused.length <= holders.length - admitted + 1, `${refused.length} of ${holders.length} refused: ${holders.map((c) => c.statuses().join() || "-").join(" ")}`);
      checks.check("body memory: the refusal is INGRESS_BODY_BYTES_LIMIT_REACHED with Retry-After, and closes",
        refused.length > 0 && refused.every((c) => /INGRESS_BODY_BYTES_LIMIT_REACHED/.test(c.data) && /Retry-After: \d+/i.test(c.data) && c.closedAt !== null));
      // with the budget used up, another large body is refused; small ones
      // (< 64 KiB) still pass on the reserve (the probe's appends too)
      const mid = await fetch(`${base()}/v1/stream/abuse/bodies`, { method: "POST", headers: { "content-type": "text/plain" }, body: "x".repeat(100 * 1024) });
      const midBody = await mid.text();
      checks.check("body memory: with the budget used up a 100 KiB body gets 503", mid.status === 503 && /INGRESS_BODY_BYTES_LIMIT_REACHED/.test(midBody), `${mid.status}`);
      const small = await fetch(`${base()}/v1/stream/abuse/bodies`, { method: "POST", headers: { "content-type": "text/plain" }, body: "s".repeat(1000) });
      await small.arrayBuffer();
      checks.check("body memory: a small body passes on the reserve", small.status === 204, `${small.status}`);
      // the holders time out (408), which gives the budget back
      await Promise.all(holders.map((c) => c.closed(LIMITS.requestTimeoutMs + SLACK_MS)));
      checks.check("body memory: stalled bodies are cut at the request timeout", holders.every((c) => c.closedAt !== null && c.closedAt - start <= LIMITS.requestTimeoutMs + SLACK_MS + 300));
      await sleep(50);
      const big = await fetch(`${base()}/v1/stream/abuse/bodies`, { method: "POST", headers: { "content-type": "text/plain" }, body: "y".repeat(LIMITS.maxBodyBytes) });
      checks.check("body memory: the budget returns once they are gone (a 1 MiB body is accepted)", big.status === 204, String(big.status));
      await big.arrayBuffer();
      const content = await streamContent("bodies");
      checks.check("body memory: only the accepted bodies applied", content === "s".repeat(1000) + "y".repeat(LIMITS.maxBodyBytes), `${content.length} bytes`);
    });

    await attack("live reads", probe, async () => {
      const tail = (await fetch(`${base()}/v1/stream/abuse/target`, { method: "HEAD" })).headers.get("stream-next-offset");
      const lp = (name) => fetch(`${base()}/v1/stream/abuse/${name}?offset=${tail === null ? "now" : "now"}&live=long-poll`, { signal: AbortSignal.timeout(8000) })
        .then(async (r) => ({ status: r.status, retry: r.headers.get("retry-after"), body: await r.text() }))
        .catch((e) => ({ status: 0, body: e.message }));
      const parked = [];
      for (let i = 0; i < LIMITS.liveReadsPerStream; i++) parked.push(lp("target"));
      await sleep(300);
      let r = await lp("target");
      checks.check("live reads: past the per-stream bound 503 LIVE_READ_BACKPRESSURE with Retry-After",
        r.status === 503 && /"LIVE_READ_BACKPRESSURE"/.test(r.body) && /stream/.test(r.body) && r.retry !== null, `${r.status} ${r.body.slice(0, 100)}`);
      const sse = await fetch(`${base()}/v1/stream/abuse/target?offset=-1&live=sse`, { signal: AbortSignal.timeout(8000) });
      checks.check("live reads: an SSE reader counts against the same bound (503)", sse.status === 503, String(sse.status));
      await sse.arrayBuffer().catch(() => {});
      const catchup = await fetch(`${base()}/v1/stream/abuse/target?offset=-1`);
      checks.check("live reads: catch-up reads of the stream are not limited", catchup.status === 200, String(catchup.status));
      await catchup.arrayBuffer();
      // other streams fill the global bound
      for (let i = 0; i < LIMITS.liveReads - LIMITS.liveReadsPerStream; i++) parked.push(lp("lp" + (i % 5)));
      await sleep(300);
      r = await lp("chunks");
      checks.check("live reads: past the global bound 503 LIVE_READ_BACKPRESSURE with Retry-After",
        r.status === 503 && /LIVE_READ_BACKPRESSURE/.test(r.body) && r.retry !== null, `${r.status} ${r.body.slice(0, 100)}`);
      // wake the first 20 with an append: capacity returns
      await fetch(`${base()}/v1/stream/abuse/target`, { method: "POST", headers: { "content-type": "text/plain" }, body: "wake" });
      const woken = await Promise.all(parked.slice(0, LIMITS.liveReadsPerStream));
      checks.check("live reads: the parked long-polls are woken with the data", woken.every((x) => x.status === 200 && x.body === "wake"),
        woken.map((x) => x.status).join(","));
      r = await fetch(`${base()}/v1/stream/abuse/target?offset=-1&live=long-poll`, { signal: AbortSignal.timeout(8000) });
      checks.check("live reads: a long-poll that can answer at once is never refused", r.status === 200, String(r.status));
      await r.arrayBuffer();
      const again = lp("target");
      await sleep(100);
      await fetch(`${base()}/v1/stream/abuse/target`, { method: "POST", headers: { "content-type": "text/plain" }, body: "again" });
      r = await again;
      checks.check("live reads: capacity returns after they were answered", r.status === 200 && r.body === "again", `${r.status}`);
      const rest = await Promise.all(parked.slice(LIMITS.liveReadsPerStream));
      checks.check("live reads: the others time out normally (204)",
        rest.every((x) => x.status === 204), [...new Set(rest.map((x) => x.status))].join(","));
    });

    const ex = await srv.stop("SIGTERM");
    checks.check("server stops gracefully after all attacks", ex.code === 0, JSON.stringify(ex));
  } catch (e) {
    checks.check("internal error", false, e.stack);
    srv.killNow();
  }
  for (const f of figures) console.log(`# ${f}`);
  console.log(`# runtime ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  if (checks.failed === 0) fs.rmSync(root, { recursive: true, force: true });
  else console.log(`# kept ${root}`);
  process.exit(checks.summary());
}

main();
