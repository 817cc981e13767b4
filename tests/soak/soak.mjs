#!/usr/bin/env node
// soak.mjs - a mixed workload against one Runnel server for a configurable
// time, with continuous verification. Not part of CI (scripts/soak.sh runs
// it; docs/TESTING.md records a 30-minute run).
//
// WORKLOAD (all on 127.0.0.1)
//   writers    each runs stream lifecycles back to back: create (text/plain
//              or application/json, v1 or bucket surface), 50..1500 appends
//              as an idempotent producer (self-identifying records derived
//              from (writer, lifecycle, seq), so nothing is kept but counts),
//              a full catch-up read that must equal exactly the acknowledged
//              records, on the bucket surface a snapshot publish at the tail
//              (HEAD and GET of the snapshot checked) and a retention advance
//              to it (a read below answers 410), a close (an append after it
//              answers 409), a delete (HEAD then answers 404).
//   readers    catch-up reads of a random stream being appended to: the bytes
//              must be a prefix of what its writer sent and hold at least
//              everything acknowledged before the read started.
//   followers  long-poll and SSE readers tailing a random text stream from
//              offset -1 until it closes (reconnecting when a response ends):
//              everything received must be a prefix of what the writer sent,
//              and a follower that saw the close must hold exactly the
//              acknowledged records.
//   restarts   optional (--restart-every-s): alternately SIGKILL and SIGTERM,
//              restart on the same data dir; every client retries with the
//              same request (producer seq, same create, same snapshot), so
//              an in-doubt write resolves to exactly once.
//   metrics    the server's RSS is sampled every 5 s (min / max / last).
//
// OUTPUT: a progress line every --report-every-s, then the figures (operations
// by kind, errors by kind, restarts, RSS, verification) and the last line
// "N passed, M failed" (N = verifications that held, M = those that did not
// plus unexpected answers). Exit 0 only when M == 0.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Server, http, parseArgs, recordBody, sleep, tempDir } from "../faults/lib.mjs";

const USAGE = `usage: node tests/soak/soak.mjs --bin build/runnel [--duration-s 1800] [--writers 12]
  [--readers 2] [--long-polls 2] [--sses 2] [--restart-every-s 0] [--append-pause-ms 10]
  [--seed N] [--data-dir DIR] [--report-every-s 60] [--json-out FILE]`;

const opts = parseArgs(process.argv.slice(2), {
  bin: "build/runnel", durationS: 1800, writers: 12, readers: 2, longPolls: 2, sses: 2,
  restartEveryS: 0, appendPauseMs: 10, seed: 0, dataDir: "", reportEveryS: 60, jsonOut: "",
}, USAGE);
if (!opts.seed) opts.seed = crypto.randomInt(1, 2 ** 31);

// ---------------------------------------------------------------- counters

const ops = new Map();    // kind -> count of answered operations
const errors = new Map(); // kind -> count of unexpected answers / failed checks
const samples = [];       // first few error descriptions
const verify = { passed: 0, failed: 0 };
const netRetries = { count: 0 };
const restarts = { kill: 0, term: 0, readyMs: [] };
const rss = { min: Infinity, max: 0, last: 0 };

const bump = (m, k, n = 1) => m.set(k, (m.get(k) ?? 0) + n);
function error(kind, detail) {
  bump(errors, kind);
  if (samples.length < 40) samples.push(`${kind}: ${detail}`);
  console.log(`ERROR ${kind}: ${detail}`);
}
function verified(kind, ok, detail) {
  if (ok) verify.passed++;
  else {
    verify.failed++;
    error(`verify ${kind}`, detail);
  }
}

function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), pick: (arr) => arr[Math.floor(next() * arr.length)] };
}

// ---------------------------------------------------------------- server

const dataRoot = opts.dataDir || tempDir("runnel-soak-", { keep: true });
fs.mkdirSync(path.join(dataRoot, "data"), { recursive: true });
const server = new Server({
  bin: opts.bin,
  dataDir: path.join(dataRoot, "data"),
  logPath: path.join(dataRoot, "server.log"),
  args: ["--checkpoint-bytes", String(8 << 20), "--wal-segment-bytes", String(4 << 20),
    "--long-poll-timeout-ms", "3000", "--sse-max-duration-ms", "15000"],
});

// Up/down state shared by all clients: `gen` counts successful starts.
const ctl = {
  up: false, gen: 0, waiters: [], stopping: false,
  changed() { return new Promise((r) => this.waiters.push(r)); },
  notify() { const w = this.waiters; this.waiters = []; for (const f of w) f(); },
};

let unexpectedExit = null;
async function startServer() {
  await server.start({ readyMs: 60000 });
  server.exited.then((x) => {
    if (!ctl.expectExit && !ctl.stopping) {
      unexpectedExit = `server exited unexpectedly ${JSON.stringify(x)}`;
      error("server exit", unexpectedExit);
      ctl.up = false;
      ctl.notify();
    }
  });
  ctl.expectExit = false;
  ctl.gen++;
  ctl.up = true;
  ctl.notify();
}

// call(fn): runs an HTTP exchange; a network failure waits for the server
// to be up (a restart may be under way) and repeats the same exchange.
// Returns {res, retried}. Gives up (throws) when the run is over.
async function call(url, init) {
  let retried = false;
  for (let attempt = 0; ; attempt++) {
    while (!ctl.up) {
      if (deadlinePassed() && ctl.finalPhase) throw new Error("run over");
      if (unexpectedExit) throw new Error(unexpectedExit);
      await Promise.race([ctl.changed(), sleep(500)]);
    }
    const gen = ctl.gen;
    try {
      const res = await http(url, { timeoutMs: 30000, ...init });
      return { res, retried };
    } catch (e) {
      retried = true;
      netRetries.count++;
      if (unexpectedExit) throw new Error(unexpectedExit);
      if (ctl.up && ctl.gen === gen) {
        // Server up and not restarted: a transient error; a few are tolerated.
        if (attempt > 20) throw new Error(`no answer after ${attempt} attempts: ${e.message}`);
        await sleep(100);
      }
    }
  }
}

// ---------------------------------------------------------------- writers

const startedAt = Date.now();
const deadline = startedAt + opts.durationS * 1000;
const deadlinePassed = () => Date.now() >= deadline;
const active = []; // streams in their append phase: {url, text, label, lc, sent, acked, json}

function expectedBytes(st, n) {
  const parts = [];
  for (let s = 0; s < n; s++) parts.push(st.body(s));
  return Buffer.concat(parts);
}

function jsonBody(label, seq) {
  const b = recordBody(label, seq, opts.seed, 120).toString("latin1");
  return JSON.stringify({ w: label, n: seq, p: b.slice(b.lastIndexOf(":") + 1, -1) });
}

// Compares a catch-up read with what the writer sent: returns null when the
// content is the first k records for some k in [minRecords, sent], else why not.
function checkPrefix(st, body, minRecords) {
  if (st.json) {
    let arr;
    try { arr = JSON.parse(body.toString("utf8")); } catch { return "read is not JSON"; }
    if (!Array.isArray(arr)) return "read is not a JSON array";
    if (arr.length < minRecords) return `read holds ${arr.length} messages, ${minRecords} were acknowledged`;
    if (arr.length > st.sent) return `read holds ${arr.length} messages, only ${st.sent} were sent`;
    for (let i = 0; i < arr.length; i++) {
      if (JSON.stringify(arr[i]) !== jsonBody(st.label, i)) return `message ${i} differs: ${JSON.stringify(arr[i]).slice(0, 120)}`;
    }
    return null;
  }
  const want = expectedBytes(st, st.sent);
  if (body.length > want.length) return `read holds ${body.length} bytes, only ${want.length} were sent`;
  if (!want.subarray(0, body.length).equals(body)) {
    let i = 0;
    while (i < body.length && body[i] === want[i]) i++;
    return `bytes differ from byte ${i}: got ${JSON.stringify(body.subarray(i, i + 60).toString("latin1"))}`;
  }
  const minLen = expectedBytes(st, minRecords).length;
  if (body.length < minLen) return `read holds ${body.length} bytes, ${minLen} were acknowledged`;
  return null;
}

async function readFull(url) {
  let offset = "-1";
  const parts = [];
  for (let page = 0; page < 100000; page++) {
    const { res } = await call(`${url}?offset=${encodeURIComponent(offset)}`);
    if (res.status !== 200) return { status: res.status, text: res.text };
    parts.push(res.body);
    offset = res.headers.get("stream-next-offset");
    if (res.headers.get("stream-up-to-date") === "true") return { status: 200, body: Buffer.concat(parts), next: offset };
  }
  return { status: 0, text: "no end" };
}

async function writer(i) {
  const rng = makeRng(opts.seed * 7919 + i);
  for (let lc = 0; !deadlinePassed(); lc++) {
    const json = lc % 3 === 2;
    const bucket = !json && lc % 2 === 1;
    const label = `w${i}l${lc}`;
    const url = bucket ? `${server.url}/soak/${label}` : `${server.url}/v1/stream/soak/${label}`;
    const type = json ? "application/json" : "text/plain";
    const st = {
      url, label, json, text: !json, sent: 0, acked: 0, phase: "create",
      body: (s) => json ? Buffer.from(jsonBody(label, s)) : recordBody(label, s, opts.seed, 200),
    };
    // create
    let { res, retried } = await call(url, { method: "PUT", headers: { "content-type": type } });
    bump(ops, "create");
    if (!(res.status === 201 || (retried && res.status === 200))) {
      error("create", `${url} answered ${res.status} ${res.text.slice(0, 200)}`);
      continue;
    }
    // appends
    st.phase = "append";
    active.push(st);
    const target = rng.int(50, 1500);
    for (let seq = 0; seq < target && !deadlinePassed(); seq++) {
      st.sent = seq + 1;
      ({ res, retried } = await call(url, {
        method: "POST",
        headers: { "content-type": type, "producer-id": label, "producer-epoch": "0", "producer-seq": String(seq) },
        body: st.body(seq),
      }));
      bump(ops, "append");
      if (res.status === 200 || (retried && res.status === 204)) {
        st.acked = seq + 1;
      } else {
        error("append", `${url} seq ${seq} answered ${res.status} ${res.text.slice(0, 200)}`);
        st.sent = st.acked;
        break;
      }
      if (opts.appendPauseMs) await sleep(rng.int(0, opts.appendPauseMs));
    }
    active.splice(active.indexOf(st), 1);
    st.phase = "verify";
    // full read: exactly the acknowledged records
    const r = await readFull(url);
    bump(ops, "read");
    if (r.status !== 200) verified("lifecycle read", false, `${url} answered ${r.status} ${r.text?.slice(0, 200)}`);
    else {
      const why = checkPrefix(st, r.body, st.acked);
      const exact = why ?? (st.json ? null : r.body.length === expectedBytes(st, st.acked).length ? null : "longer than acknowledged");
      verified("lifecycle read", exact === null, `${url}: ${exact}`);
    }
    const tail = r.next;
    // snapshot + retention (bucket surface)
    if (bucket && tail) {
      const snap = Buffer.from(`snapshot of ${label} at ${tail}`);
      ({ res } = await call(`${url}/snapshot/${encodeURIComponent(tail)}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: snap }));
      bump(ops, "snapshot");
      if (res.status !== 204) error("snapshot", `${url} answered ${res.status} ${res.text.slice(0, 200)}`);
      else {
        const g = (await call(`${url}/snapshot/${encodeURIComponent(tail)}`)).res;
        bump(ops, "snapshot read");
        verified("snapshot read", g.status === 200 && g.body.equals(snap), `${url} snapshot read ${g.status} ${g.text.slice(0, 100)}`);
        ({ res } = await call(`${url}/retention/${encodeURIComponent(tail)}`, { method: "PUT" }));
        bump(ops, "retention");
        if (res.status !== 204) error("retention", `${url} answered ${res.status} ${res.text.slice(0, 200)}`);
        else if (st.acked > 0) {
          const below = (await call(`${url}?offset=${encodeURIComponent("0000000000000000_0000000000000000")}`)).res;
          bump(ops, "read");
          verified("retention 410", below.status === 410, `${url} read below retention answered ${below.status}`);
        }
      }
    }
    // close, then an append must be refused
    ({ res } = await call(url, { method: "POST", headers: { "stream-closed": "true" } }));
    bump(ops, "close");
    if (res.status !== 204 && res.status !== 200) error("close", `${url} answered ${res.status} ${res.text.slice(0, 200)}`);
    else {
      const after = (await call(url, { method: "POST", headers: { "content-type": type }, body: st.body(st.acked) })).res;
      bump(ops, "append");
      verified("append after close", after.status === 409, `${url} append after close answered ${after.status}`);
      const h = (await call(url, { method: "HEAD" })).res;
      bump(ops, "head");
      verified("head closed", h.status === 200 && h.headers.get("stream-closed") === "true", `${url} HEAD ${h.status} closed=${h.headers.get("stream-closed")}`);
    }
    st.phase = "closed";
    // delete
    ({ res, retried } = await call(url, { method: "DELETE" }));
    bump(ops, "delete");
    if (!(res.status === 204 || res.status === 200 || (retried && res.status === 404))) error("delete", `${url} answered ${res.status} ${res.text.slice(0, 200)}`);
    else {
      const h = (await call(url, { method: "HEAD" })).res;
      bump(ops, "head");
      verified("deleted", h.status === 404, `${url} HEAD after delete answered ${h.status}`);
    }
    st.phase = "deleted";
  }
}

// ---------------------------------------------------------------- readers

async function reader(i) {
  const rng = makeRng(opts.seed * 104729 + i);
  while (!deadlinePassed()) {
    if (active.length === 0) { await sleep(50); continue; }
    const st = rng.pick(active);
    const minRecords = st.acked;
    const r = await readFull(st.url);
    bump(ops, "read");
    if (st.phase !== "append") continue; // the lifecycle moved on meanwhile
    if (r.status !== 200) { verified("catch-up read", false, `${st.url} answered ${r.status} ${r.text?.slice(0, 200)}`); continue; }
    const why = checkPrefix(st, r.body, minRecords);
    verified("catch-up read", why === null, `${st.url}: ${why}`);
    await sleep(rng.int(0, 200));
  }
}

// ---------------------------------------------------------------- followers

// Follows st from -1 with long-polls until it closes or leaves its append
// phase; returns the bytes received.
async function followLongPoll(st) {
  let offset = "-1";
  const parts = [];
  let closed = false;
  const until = Date.now() + 30000;
  while (!closed && Date.now() < until && !deadlinePassed()) {
    let res;
    try {
      ({ res } = await call(`${st.url}?offset=${encodeURIComponent(offset)}&live=long-poll`));
    } catch { break; }
    bump(ops, "long-poll");
    if (res.status === 404 || res.status === 410) break;
    if (res.status !== 200 && res.status !== 204) { error("long-poll", `${st.url} answered ${res.status} ${res.text.slice(0, 100)}`); break; }
    if (res.status === 200) parts.push(res.body);
    offset = res.headers.get("stream-next-offset") ?? offset;
    closed = res.headers.get("stream-closed") === "true";
    if (st.phase === "deleted") break;
  }
  return { body: Buffer.concat(parts), closed };
}

// The same with SSE: text data events, control events for the offset and
// the close; reconnects when a response ends.
async function followSse(st) {
  let offset = "-1";
  const parts = [];
  let closed = false;
  const until = Date.now() + 30000;
  while (!closed && Date.now() < until && !deadlinePassed() && st.phase !== "deleted") {
    while (!ctl.up) await Promise.race([ctl.changed(), sleep(500)]);
    let res;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 20000);
    try {
      res = await fetch(`${st.url}?offset=${encodeURIComponent(offset)}&live=sse`, { signal: ac.signal });
      bump(ops, "sse");
      if (res.status === 404 || res.status === 410) { await res.arrayBuffer(); break; }
      if (res.status !== 200) { error("sse", `${st.url} answered ${res.status}`); await res.arrayBuffer(); break; }
      const dec = new TextDecoder();
      let buf = "";
      let pending = []; // data payloads not yet confirmed by a control event
      for await (const chunk of res.body) {
        buf += dec.decode(chunk, { stream: true });
        let k;
        while ((k = buf.indexOf("\n\n")) >= 0) {
          const ev = buf.slice(0, k);
          buf = buf.slice(k + 2);
          const lines = ev.split("\n");
          const type = (lines.find((l) => l.startsWith("event:")) ?? "").slice(6).trim();
          const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
          if (type === "data") pending.push(Buffer.from(data, "latin1"));
          else if (type === "control") {
            const c = JSON.parse(data);
            parts.push(...pending);
            pending = [];
            offset = c.streamNextOffset;
            bump(ops, "sse event");
            if (c.streamClosed) closed = true;
          } else if (type === "error") {
            break;
          }
        }
      }
    } catch { /* aborted or the server restarted: reconnect from offset */ }
    clearTimeout(timer);
  }
  return { body: Buffer.concat(parts), closed };
}

async function follower(i, kind) {
  const rng = makeRng(opts.seed * 15485863 + i);
  while (!deadlinePassed()) {
    const texts = active.filter((s) => s.text && s.sent < 100);
    if (texts.length === 0) { await sleep(100); continue; }
    const st = rng.pick(texts);
    const got = kind === "sse" ? await followSse(st) : await followLongPoll(st);
    const why = checkPrefix(st, got.body, 0);
    verified(`${kind} follower`, why === null, `${st.url}: ${why}`);
    if (got.closed && why === null) {
      const exact = got.body.length === expectedBytes(st, st.acked).length;
      verified(`${kind} follower saw everything`, exact, `${st.url}: got ${got.body.length} bytes at the close`);
    }
  }
}

// ---------------------------------------------------------------- restarts, RSS, reports

async function restarter() {
  if (!opts.restartEveryS) return;
  let n = 0;
  while (true) {
    const wake = Date.now() + opts.restartEveryS * 1000;
    while (Date.now() < wake && !deadlinePassed()) await sleep(200);
    if (deadlinePassed() || unexpectedExit) return;
    const sig = n++ % 2 === 0 ? "SIGKILL" : "SIGTERM";
    ctl.up = false;
    ctl.expectExit = true;
    ctl.notify();
    const ex = await server.stop(sig, 20000);
    if (sig === "SIGKILL") restarts.kill++;
    else {
      restarts.term++;
      if (ex.code !== 0) error("graceful stop", `SIGTERM exit ${JSON.stringify(ex)}`);
    }
    const t0 = Date.now();
    try {
      await startServer();
    } catch (e) {
      error("restart", e.message.slice(0, 500));
      unexpectedExit = "restart failed";
      ctl.notify();
      return;
    }
    restarts.readyMs.push(Date.now() - t0);
  }
}

async function sampler() {
  while (!deadlinePassed()) {
    if (ctl.up) {
      const kib = server.rssKiB();
      if (kib) {
        rss.min = Math.min(rss.min, kib);
        rss.max = Math.max(rss.max, kib);
        rss.last = kib;
      }
    }
    await sleep(5000);
  }
}

function opsTotal() {
  let n = 0;
  for (const v of ops.values()) n += v;
  return n;
}

async function reporter() {
  let lastOps = 0;
  let lastT = Date.now();
  while (!deadlinePassed()) {
    const wake = Date.now() + opts.reportEveryS * 1000;
    while (Date.now() < wake && !deadlinePassed()) await sleep(200);
    const now = Date.now();
    const total = opsTotal();
    const errs = [...errors.values()].reduce((a, b) => a + b, 0);
    console.log(`# t=${Math.round((now - startedAt) / 1000)}s ops=${total} (${Math.round((total - lastOps) / ((now - lastT) / 1000))}/s) ` +
      `errors=${errs} verified=${verify.passed}/${verify.passed + verify.failed} restarts=${restarts.kill + restarts.term} rss=${rss.last} KiB`);
    lastOps = total;
    lastT = now;
  }
}

// ---------------------------------------------------------------- main

async function main() {
  console.log(`# soak: seed ${opts.seed}, ${opts.durationS} s, ${opts.writers} writers, ${opts.readers} readers, ` +
    `${opts.longPolls} long-poll + ${opts.sses} SSE followers, restart every ${opts.restartEveryS || "never"} s, data ${dataRoot}`);
  await startServer();
  const tasks = [];
  for (let i = 0; i < opts.writers; i++) tasks.push(writer(i).catch((e) => error("writer crashed", e.stack)));
  for (let i = 0; i < opts.readers; i++) tasks.push(reader(i).catch((e) => error("reader crashed", e.stack)));
  for (let i = 0; i < opts.longPolls; i++) tasks.push(follower(i, "long-poll").catch((e) => error("follower crashed", e.stack)));
  for (let i = 0; i < opts.sses; i++) tasks.push(follower(100 + i, "sse").catch((e) => error("follower crashed", e.stack)));
  const background = [restarter(), sampler(), reporter()];
  // Hard stop: the run may overrun its duration by at most 5 minutes.
  const hard = setTimeout(() => {
    error("overrun", "clients did not finish within 5 minutes after the deadline");
    finish();
  }, opts.durationS * 1000 + 300000);
  hard.unref();
  await Promise.all(tasks);
  ctl.finalPhase = true;
  await Promise.all(background);
  // final: a graceful stop must exit 0, and a restart must serve
  ctl.stopping = true;
  const ex = await server.stop("SIGTERM", 20000);
  if (!ex || ex.code !== 0) error("final stop", `SIGTERM exit ${JSON.stringify(ex)}`);
  ctl.stopping = false;
  try {
    ctl.expectExit = true;
    await server.start({ readyMs: 60000 });
    const m = await http(`${server.url}/__runnel/metrics`);
    verified("final restart", m.status === 200, `metrics answered ${m.status}`);
  } catch (e) {
    verified("final restart", false, e.message.slice(0, 300));
  }
  ctl.stopping = true;
  await server.stop("SIGTERM", 20000);
  finish();
}

function finish() {
  const elapsed = (Date.now() - startedAt) / 1000;
  const errs = [...errors.values()].reduce((a, b) => a + b, 0);
  const readyMs = restarts.readyMs.slice().sort((a, b) => a - b);
  console.log(`# elapsed ${elapsed.toFixed(0)} s, seed ${opts.seed}`);
  console.log(`# operations: ${opsTotal()} (${(opsTotal() / elapsed).toFixed(0)}/s): ` +
    [...ops.entries()].sort().map(([k, v]) => `${k}=${v}`).join(" "));
  console.log(`# errors: ${errs}${errs ? ": " + [...errors.entries()].map(([k, v]) => `${k}=${v}`).join(" ") : ""}`);
  console.log(`# network retries (restarts included): ${netRetries.count}`);
  console.log(`# restarts: ${restarts.kill} SIGKILL, ${restarts.term} SIGTERM; ready after ${readyMs.length ? `${readyMs[0]}..${readyMs[readyMs.length - 1]} ms` : "-"}`);
  console.log(`# server RSS: min ${rss.min === Infinity ? 0 : rss.min} KiB, max ${rss.max} KiB, last ${rss.last} KiB`);
  console.log(`# verification: ${verify.passed} checks held, ${verify.failed} failed`);
  if (opts.jsonOut) {
    fs.writeFileSync(opts.jsonOut, JSON.stringify({
      seed: opts.seed, elapsedS: elapsed, ops: Object.fromEntries(ops), errors: Object.fromEntries(errors),
      netRetries: netRetries.count, restarts, rssKiB: rss, verify, samples,
    }, null, 2));
  }
  server.killNow();
  if (errs === 0) fs.rmSync(dataRoot, { recursive: true, force: true });
  else console.log(`# kept ${dataRoot} (server.log inside)`);
  // passed: verifications that held; failed: every error (failed
  // verifications included).
  console.log(`${verify.passed} passed, ${errs} failed`);
  process.exit(errs === 0 ? 0 : 1);
}

process.on("SIGINT", () => { error("interrupted", "SIGINT"); finish(); });
main().catch((e) => { error("internal", e.stack); finish(); });
