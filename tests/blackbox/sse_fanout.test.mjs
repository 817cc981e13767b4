// SSE fan-out: many readers of one stream (PROTOCOL.md §5.8). Every reader
// gets every event byte-exact and in order, with control events that match
// its position, whether the server writes an event from the chunk all
// readers share, queues what a full socket did not take, pauses a reader
// whose socket stays full (--sse-queue-bytes) and resumes it, or loses a
// reader mid-stream (closed cleanly, or reset with unread data); with the
// writes of each wake-up sent by the loop thread alone or split between it
// and fan-out threads.
//
// The readers speak raw HTTP/1.1 over TCP so that the chunked framing is
// checked too, and so that a reader can stop reading: its socket then
// fills (a loopback socket takes about 4 MiB before it refuses bytes, so
// part of the stream is written in 256 KiB appends).
import assert from "node:assert/strict";
import crypto from "node:crypto";
import net from "node:net";
import { test } from "node:test";
import { readAll, Server, sleep } from "./lib/server.mjs";

const READERS = 300;
const BIG = 256 * 1024;
const CURSOR_EPOCH_MS = 1728432000000;
const interval = () => Math.floor((Date.now() - CURSOR_EPOCH_MS) / 20000);
const token = (n) => `0000000000000000_${String(n).padStart(16, "0")}`;

async function until(cond, what, ms = 60000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

// The payloads: short text lines (some with LFs and leading spaces, which
// SSE must carry as separate data: lines), then 256 KiB appends, then short
// ones again; the last one closes the stream.
function payloads() {
  const out = [];
  for (let i = 0; i < 80; i++)
    out.push(i % 7 === 3 ? ` lead ${i}\nsecond line\n  third ${"x".repeat(i)}` : `event ${i} ${"y".repeat(i % 50)}`);
  for (let i = 0; i < 24; i++) out.push(String.fromCharCode(97 + i).repeat(BIG - 1) + "\n");
  for (let i = 0; i < 40; i++) out.push(`after ${i}`);
  return out;
}

// The data event the server sends for text bytes: one data: line per line
// ("data: " when the line starts with a space, which the client strips).
function dataEvent(text) {
  let ev = "event: data\n";
  for (const line of text.split("\n")) ev += (line.startsWith(" ") ? "data: " : "data:") + line + "\n";
  return ev + "\n";
}

function controlEvent(pos, cursor, upToDate, closed) {
  if (closed) return `event: control\ndata:{"streamNextOffset":"${token(pos)}","streamClosed":true,"upToDate":true}\n\n`;
  return `event: control\ndata:{"streamNextOffset":"${token(pos)}","streamCursor":"${cursor}"${upToDate ? ',"upToDate":true' : ""}}\n\n`;
}

// One SSE reader on a raw socket. It checks the response as it arrives:
// the chunked framing, each event's bytes against what the server must
// send for the stream bytes it covers, and the control event after each
// data event; `hash` covers the decoded body with cursor values left out.
class Reader {
  constructor(port, path, stream, start, { cursor } = {}) {
    this.stream = stream; // the whole stream's text, known in advance
    this.pos = start;
    this.cursor = cursor;
    this.dataEvents = 0;
    this.events = 0;
    this.ended = false;
    this.failure = null;
    this.hash = crypto.createHash("sha256");
    this.raw = Buffer.alloc(0);
    this.head = null;
    this.body = ""; // decoded, not yet parsed into events
    this.expectControl = true; // the response opens with a control event
    this.onData = null; // called with the count of data events after each
    // The interval when the reader stopped reading: events it then parses
    // late were sent no earlier than that, on a loaded machine minutes ago.
    this.pausedAt = undefined;
    this.sock = net.connect(port, "127.0.0.1");
    this.sock.setNoDelay(true);
    const q = `offset=${token(start)}&live=sse${cursor === undefined ? "" : `&cursor=${cursor}`}`;
    this.sock.write(`GET ${path}?${q} HTTP/1.1\r\nHost: t\r\n\r\n`);
    this.sock.on("data", (d) => this.feed(d));
    this.sock.on("error", () => {});
    this.closed = new Promise((r) => this.sock.on("close", r));
  }

  fail(msg) {
    this.failure ??= msg;
    this.sock.destroy();
  }

  feed(d) {
    if (this.failure) return;
    this.raw = this.raw.length ? Buffer.concat([this.raw, d]) : d;
    try {
      if (!this.head) {
        const i = this.raw.indexOf("\r\n\r\n");
        if (i < 0) return;
        this.head = this.raw.subarray(0, i).toString("latin1");
        this.raw = this.raw.subarray(i + 4);
        if (!/^HTTP\/1\.1 200 /.test(this.head) || !/\r\ntransfer-encoding: chunked/i.test(this.head))
          return this.fail(`bad response head: ${this.head}`);
      }
      this.unchunk();
      this.parseEvents();
    } catch (e) {
      this.fail(e.message);
    }
  }

  // Decodes whole chunks from raw into body.
  unchunk() {
    for (;;) {
      if (this.ended) {
        if (this.raw.length) throw new Error("bytes after the last chunk");
        return;
      }
      const eol = this.raw.indexOf("\r\n");
      if (eol < 0) return;
      const line = this.raw.subarray(0, eol).toString("latin1");
      if (!/^[0-9a-f]+$/.test(line)) throw new Error(`bad chunk size line ${JSON.stringify(line)}`);
      const n = parseInt(line, 16);
      if (this.raw.length < eol + 2 + n + 2) return;
      if (this.raw.toString("latin1", eol + 2 + n, eol + 4 + n) !== "\r\n") throw new Error("chunk not ended by CRLF");
      if (n === 0) this.ended = true;
      else this.body += this.raw.toString("latin1", eol + 2, eol + 2 + n);
      this.raw = this.raw.subarray(eol + 4 + n);
    }
  }

  parseEvents() {
    for (;;) {
      const end = this.body.indexOf("\n\n");
      if (end < 0) break;
      const ev = this.body.slice(0, end + 2);
      this.body = this.body.slice(end + 2);
      this.event(ev);
    }
    if (this.ended && this.body.length) throw new Error("response ended inside an event");
  }

  event(ev) {
    this.events++;
    const lines = ev.slice(0, -2).split("\n");
    const type = lines[0];
    const data = lines
      .slice(1)
      .map((l) => {
        if (!l.startsWith("data:")) throw new Error(`unexpected line ${JSON.stringify(l)}`);
        return l.slice(l.startsWith("data: ") ? 6 : 5);
      })
      .join("\n");
    if (type === "event: data") {
      if (this.expectControl) throw new Error("two data events without a control event between");
      const want = this.stream.slice(this.pos, this.pos + data.length);
      if (data.length === 0 || data !== want)
        throw new Error(`data at ${this.pos} differs from the stream (${data.length} bytes)`);
      if (ev !== dataEvent(data)) throw new Error(`data event at ${this.pos} is not framed as expected`);
      this.pos += data.length;
      this.dataEvents++;
      this.hash.update(ev);
      this.expectControl = true;
      this.onData?.(this.dataEvents);
      return;
    }
    if (type !== "event: control" || !this.expectControl) throw new Error(`unexpected event ${JSON.stringify(ev.slice(0, 80))}`);
    this.expectControl = false;
    const c = JSON.parse(data);
    const closed = c.streamClosed === true;
    const upToDate = c.upToDate === true;
    if (ev !== controlEvent(this.pos, c.streamCursor, upToDate, closed))
      throw new Error(`control event at ${this.pos} is not as expected: ${JSON.stringify(ev)}`);
    if (closed && this.pos !== this.stream.length) throw new Error("closure reported before the end");
    if (!closed) {
      const v = Number(c.streamCursor);
      if (this.cursor !== undefined && !(v > this.cursor && v <= this.cursor + 180))
        throw new Error(`cursor ${v} is not just past the client's ${this.cursor}`);
      const sentNoEarlier = this.pausedAt ?? interval();
      if (this.cursor === undefined && !(v >= sentNoEarlier - 1 && v <= interval()))
        throw new Error(`cursor ${v} is not the current interval ${interval()}`);
    }
    if (upToDate) this.upToDate = (this.upToDate ?? 0) + 1;
    this.hash.update(controlEvent(this.pos, "C", upToDate, closed));
  }
}

async function post(url, body, close = false) {
  const headers = { "content-type": "text/plain" };
  if (close) headers["stream-closed"] = "true";
  const r = await fetch(url, { method: "POST", headers, body });
  assert.ok(r.status === 204 || r.status === 200, `append answered ${r.status}`);
}

// Runs the scenario on a fresh server; returns the digest that every
// reader which kept up received.
async function fanout(args) {
  // --sse-max-duration-ms: on a loaded machine the scenario can take longer
  // than the default 60 s, after which the server rightly ends every SSE
  // response (clients reconnect); the readers here expect one response.
  const server = new Server({
    args: ["--sse-queue-bytes", "65536", "--max-live-reads-per-stream", "1000", "--sse-max-duration-ms", "900000", ...args],
  });
  await server.start();
  try {
    const url = server.stream("fanout");
    let r = await fetch(url, { method: "PUT", headers: { "content-type": "text/plain" }, body: "seed" });
    assert.equal(r.status, 201);
    const start = 4;
    const texts = payloads();
    const stream = "seed" + texts.join("");
    const path = new URL(url).pathname;
    const readers = [];
    for (let i = 0; i < READERS; i++) {
      const opts = i % 50 === 7 ? { cursor: interval() + 1000 } : {};
      readers.push(new Reader(server.port, path, stream, start, opts));
    }
    const slow = [readers[10], readers[150], readers[290]];
    const quits = readers[20]; // closes its connection mid-stream
    const resets = readers[290]; // stops reading, then closes with unread data
    // Readers the server wakes last (the newest waiter is woken first) are
    // reset by the first one as soon as it has an event, so that their
    // resets can meet the server while it is still writing that event.
    const reset = readers.slice(30, 50);
    readers[READERS - 1].onData = (k) => {
      if (k === 82) for (const x of reset) x.sock.resetAndDestroy();
    };
    const left = [quits, resets, ...reset];
    const fast = readers.filter((x) => !slow.includes(x) && !left.includes(x));
    const live = (x) => !x.failure;
    await until(() => readers.every((x) => x.events >= 1 || x.failure), "the opening control events");

    let tail = start;
    for (let i = 0; i < texts.length; i++) {
      if (i === 20)
        for (const x of slow) {
          x.pausedAt = interval();
          x.sock.pause();
        }
      if (i === 30) quits.sock.destroy();
      if (i === 104) resets.sock.destroy(); // after the 256 KiB appends
      if (i === 110) for (const x of slow) if (x !== resets) x.sock.resume();
      await post(url, texts[i], i === texts.length - 1);
      tail += texts[i].length;
      await until(() => fast.every((x) => !live(x) || x.pos === tail), `readers at ${tail}`);
    }
    const done = readers.filter((x) => !left.includes(x));
    await until(() => done.every((x) => x.ended || x.failure), "every response to end");
    for (const [i, x] of readers.entries())
      if (done.includes(x)) assert.equal(x.failure, null, `reader ${i}: ${x.failure}`);
    for (const x of done) assert.equal(x.pos, stream.length);

    // Readers that kept up got one event per append, each up to date.
    for (const x of fast) {
      assert.equal(x.dataEvents, texts.length);
      assert.equal(x.upToDate, texts.length + 1);
    }
    // The slow readers' sockets filled: the server paused them and sent
    // what had gathered as fewer, larger events once they drained.
    for (const x of slow.filter((y) => y !== resets)) assert.ok(x.dataEvents < texts.length, `${x.dataEvents} events`);
    // Those that left got a correct prefix.
    for (const x of left) assert.ok(x.failure === null && x.pos > start && x.pos < stream.length);

    const digests = new Set(fast.map((x) => x.hash.digest("hex")));
    assert.equal(digests.size, 1, "readers that kept up got the same bytes");

    // The server is still well.
    const all = await readAll(url);
    assert.ok(all.closed && all.body.toString("latin1") === stream, "the stream reads back whole");
    const exit = await server.stop();
    assert.equal(exit.code, 0, `server exit ${JSON.stringify(exit)}\n${server.log.slice(-2000)}`);
    assert.doesNotMatch(server.log, /Sanitizer|runtime error/);
    return [...digests][0];
  } finally {
    await server.stop();
  }
}

// With fan-out threads the writes of one wake-up go out from several
// threads (--fanout-threads; 300 sockets is past the batch size that uses
// them); without, the loop thread writes each at once. The bytes must not
// differ.
test("300 SSE readers of one stream get every event byte-exact, in order, with slow and leaving readers; with and without fan-out threads alike", async () => {
  const serial = await fanout(["--fanout-threads", "0"]);
  const parallel = await fanout(["--fanout-threads", "3"]);
  assert.equal(parallel, serial);
});
