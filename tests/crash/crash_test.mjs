#!/usr/bin/env node
// crash_test.mjs - black-box crash-recovery test for Runnel (a Durable Streams
// HTTP server). It is written against spec/PROTOCOL.md (sections 5.1, 5.2,
// 5.2.1, 5.6 and 8), not against Runnel's code.
//
// WHAT IT PROVES
//   With writers appending all the time and the server killed with SIGKILL
//   several times, at random moments:
//   - every acknowledged append survives, whole, exactly once, in order;
//   - an append that was in flight when the server died ("in doubt") is either
//     fully applied or not applied at all: retrying it with the same
//     idempotent-producer headers and body answers 200 (it was not applied, it
//     is now) or 204 (it had been applied; duplicate), never anything else;
//   - the idempotent producers' dedup state survives restarts (a final
//     duplicate of each writer's last request answers 204 and appends nothing);
//   - the server restarts on the same data dir and serves within 10 s, stops
//     gracefully on SIGTERM (exit code 0 within 10 s), and HEAD agrees with
//     the tail a catch-up read reaches.
//
// HOW
//   1. Temp dir (data dir + server log), free loopback port, `runnel serve`.
//   2. S streams /v1/stream/crash/s{i}: even i application/octet-stream, odd i
//      application/json.
//   3. W closed-loop writers per stream (default 1), each an idempotent
//      producer (Producer-Id w{i} or w{i}.{k}, Producer-Epoch 0, Producer-Seq
//      0,1,2,...). Every record names its writer and seq, so the final content
//      can be checked exactly. Each writer keeps the exact body of every seq.
//   4. R rounds: sleep 200..1500 ms (seeded PRNG), SIGKILL, wait for exit,
//      restart on the same data dir. A writer whose request failed at the
//      network level retries the same request after the restart.
//   5. Stop writers, SIGTERM (expect exit 0), restart, then read every stream
//      from offset -1 and compare with what the writers sent; duplicate each
//      writer's last request (expect 204); HEAD (expect the read's tail).
//
// POWER CUTS (--power-cut PATH_TO_FS_SHUTDOWN; root): a SIGKILL keeps the
//   page cache, so it cannot tell a write that reached the disk from one that
//   did not. With --power-cut the data directory lives on an ext4 file system
//   in a loop-mounted image (in the temp dir), and each round cuts the power
//   instead: the server is frozen (SIGSTOP: no answer leaves after the cut),
//   the file system is shut down without flushing its journal
//   (tests/crash/fs_shutdown.c: EXT4_IOC_SHUTDOWN, NOLOGFLUSH), the server
//   is SIGKILLed, the file system unmounted, its loop device detached,
//   attached again and mounted (the journal replays what was committed), and
//   the server restarted. Everything the page cache held is gone, so every
//   acknowledged append survives only if its sync reached the device: the
//   same checks then prove that the log's syncs are real (the test fails
//   with the log's fdatasync removed). Without root the run is skipped,
//   saying so ("0 passed, 0 failed, 1 skipped").
//
// LARGE APPENDS (--large-append-bytes N): the server runs with
//   --large-append-bytes N (a body of at least N bytes is written once: to
//   its stream file, synced there, then a record naming it is logged), and
//   every writer's odd seqs are large records: a binary record padded to
//   between N and 4N bytes, a JSON request whose messages' pads add up to
//   that (stored form at least N), the padding hex derived from --seed,
//   the writer and the seq, so the content check stays exact; a writer's
//   large records stop at a quarter of --image-mib shared among the writers
//   (a faster disk must not fill the image, nor the writers' memory), its
//   later records all small. The server must count appends written once
//   (runnel_appends_written_once_total above 0 before the graceful stop:
//   the path was taken). With --power-cut this proves that the stream
//   file's sync before the record is real, as the log's is: a large append
//   acknowledged must be on the device, not in the page cache the cut
//   throws away (the test fails with that fdatasync made a no-op).
//
// OUTPUT: "FAIL <check>: <details>" per failed check, "# ..." stats lines, and
// the last line "N passed, M failed" (", K skipped" when skipped). Exit code 0
// only if M == 0. The temp dir is removed on success and kept (path printed)
// on failure.

import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { freePort, sleep, tempDir } from '../lib/server.mjs';
import {
  Disk, NetError, deriveSeed, describeAnswer, http, largePad, makeRng, verifyDedup, verifyHead, verifyStream,
} from './crash_lib.mjs';

const USAGE =
  'usage: node tests/crash/crash_test.mjs --bin PATH_TO_RUNNEL [--rounds 6] [--streams 40]\n' +
  '           [--writers-per-stream 1] [--seed N] [--timeout-ms 120000]\n' +
  '           [--power-cut PATH_TO_FS_SHUTDOWN [--image-mib 1024]] [--large-append-bytes N]';

const READY_TIMEOUT_MS = 10_000;     // server start/restart until it answers
const EXIT_TIMEOUT_MS = 10_000;      // SIGKILL/SIGTERM until the process exits
const PROBE_PATH = '/__runnel/readyz'; // 200 once recovery finished
const KILL_DELAY_MIN_MS = 200;
const KILL_DELAY_MAX_MS = 1500;
const TAIL_AFTER_LAST_ROUND_MS = 300; // writers keep going this long after the last restart
const WRITER_STOP_TIMEOUT_MS = 30_000;
const TRANSIENT_BACKOFF_MS = 50;
const MAX_TRANSIENT_RETRIES = 5;     // network errors while the server is up, per request
const BIN_PAD_MAX = 200;             // hex pad length of a binary record: 0..200
const JSON_PAD_MAX = 48;             // hex pad length of a JSON message: 0..48
const LOG_TAIL_LINES = 40;

// ---------------------------------------------------------------- arguments

// parseArgs(argv) -> options. Exits with status 2 and the usage text on bad input.
function parseArgs(argv) {
  const opts = { bin: null, rounds: 6, streams: 40, writersPerStream: 1, seed: null, timeoutMs: 120_000,
    powerCut: null, imageMib: 1024, largeAppendBytes: null };
  const ints = { '--rounds': ['rounds', 0], '--streams': ['streams', 1],
    '--writers-per-stream': ['writersPerStream', 1], '--seed': ['seed', 0], '--timeout-ms': ['timeoutMs', 1000],
    '--image-mib': ['imageMib', 64], '--large-append-bytes': ['largeAppendBytes', 1] };
  for (let i = 0; i < argv.length; i++) {
    let [flag, value] = argv[i].split(/=(.*)/s, 2);
    if (flag === '-h' || flag === '--help') { console.log(USAGE); process.exit(0); }
    if (flag !== '--bin' && flag !== '--power-cut' && !(flag in ints)) usageExit(`unknown argument: ${argv[i]}`);
    if (value === undefined) {
      if (i + 1 >= argv.length) usageExit(`missing value for ${flag}`);
      value = argv[++i];
    }
    if (flag === '--bin') { opts.bin = value; continue; }
    if (flag === '--power-cut') { opts.powerCut = path.resolve(value); continue; }
    const [key, min] = ints[flag];
    if (!/^[0-9]+$/.test(value) || Number(value) < min || !Number.isSafeInteger(Number(value))) {
      usageExit(`${flag} needs an integer >= ${min}, got ${JSON.stringify(value)}`);
    }
    opts[key] = Number(value);
  }
  if (!opts.bin) usageExit('--bin is required');
  opts.bin = path.resolve(opts.bin);
  try { fs.accessSync(opts.bin, fs.constants.X_OK); } catch { usageExit(`not an executable file: ${opts.bin}`); }
  if (opts.seed === null) opts.seed = crypto.randomInt(0, 2 ** 32 - 1);
  opts.seed = opts.seed % 2 ** 32;
  return opts;
}

function usageExit(msg) {
  console.error(`crash_test: ${msg}\n${USAGE}`);
  process.exit(2);
}

// ------------------------------------------------------------------- checks

const checks = { passed: 0, failed: 0 };

// check(name, issues): one counted check; passes iff issues is empty. Prints
// one line per failed check (the first few issues, and how many more).
function check(name, issues) {
  if (issues.length === 0) { checks.passed++; return true; }
  checks.failed++;
  const shown = issues.slice(0, 3).join('; ');
  console.log(`FAIL ${name}: ${shown}${issues.length > 3 ? ` (+${issues.length - 3} more)` : ''}`);
  return false;
}

// -------------------------------------------------------------- the server

// ServerCtl owns the server process. Invariants:
//   up   - true only between a successful waitReady() and the next stop();
//   gen  - incremented by each successful waitReady(); gen 1 is the first start,
//          gen r+1 is the server after round r's restart;
//   fatal- set (with a message) if the server exits without being asked to;
//          everyone waiting on changed() is woken.
class ServerCtl {
  constructor({ bin, port, dataDir, logPath, args = [] }) {
    Object.assign(this, { bin, port, dataDir, logPath, args });
    this.base = `http://127.0.0.1:${port}`;
    this.child = null;
    this.exited = null;
    this.expectExit = false;
    this.up = false;
    this.gen = 0;
    this.fatal = null;
    this.fatalSeen = new Promise((r) => { this.resolveFatal = r; }); // resolves when fatal is set
    this.waiters = [];
    this.logFd = fs.openSync(logPath, 'a');
  }

  // changed() -> promise resolved at the next change of up/gen/fatal.
  changed() { return new Promise((r) => this.waiters.push(r)); }
  notify() { const w = this.waiters; this.waiters = []; for (const f of w) f(); }

  // start(): spawn `runnel serve` on the data dir, output appended to the log.
  start() {
    fs.writeSync(this.logFd, `\n===== crash_test: start (gen ${this.gen + 1}) at ${new Date().toISOString()} =====\n`);
    this.expectExit = false;
    const child = spawn(this.bin, ['serve', '--listen', `127.0.0.1:${this.port}`, '--data-dir', this.dataDir, ...this.args],
      { stdio: ['ignore', this.logFd, this.logFd] });
    this.child = child;
    this.exited = new Promise((resolve) => {
      child.once('error', (err) => { this.setFatal(`cannot start server: ${err.message}`); resolve({ code: null, signal: null, error: err }); });
      child.once('exit', (code, signal) => {
        if (!this.expectExit) this.setFatal(`server exited unexpectedly (code=${code}, signal=${signal})`);
        resolve({ code, signal });
      });
    });
  }

  setFatal(msg) {
    if (!this.fatal) this.fatal = msg;
    this.resolveFatal();
    this.up = false;
    this.notify();
  }

  // waitReady() -> ms it took, or null if HEAD PROBE_PATH did not answer 200
  // within READY_TIMEOUT_MS (or the process died).
  async waitReady() {
    const t0 = Date.now();
    while (Date.now() - t0 < READY_TIMEOUT_MS) {
      if (this.fatal) return null;
      try {
        const res = await http(this.base, 'HEAD', PROBE_PATH);
        if (this.fatal) return null;
        if (res.status !== 200) { await sleep(20); continue; }
        this.gen++;
        this.up = true;
        this.notify();
        return Date.now() - t0;
      } catch { await sleep(50); }
    }
    return null;
  }

  // stop(signal) -> {code, signal} of the exit, or null if the process did
  // not exit within EXIT_TIMEOUT_MS (it is then SIGKILLed).
  async stop(signal) {
    this.up = false;
    this.expectExit = true;
    this.notify();
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    const timeout = sleep(EXIT_TIMEOUT_MS).then(() => null);
    const ex = await Promise.race([this.exited, timeout]);
    if (ex === null) { this.child.kill('SIGKILL'); await this.exited; }
    return ex;
  }

  // killNow(): last-resort SIGKILL, safe to call from a process 'exit' handler.
  killNow() {
    try {
      if (this.child && this.child.exitCode === null && this.child.signalCode === null) {
        this.expectExit = true;
        this.child.kill('SIGKILL');
      }
    } catch { /* nothing left to do */ }
  }

  logTail() {
    try {
      const lines = fs.readFileSync(this.logPath, 'utf8').split('\n');
      return lines.slice(-LOG_TAIL_LINES).join('\n');
    } catch (err) { return `(cannot read log: ${err.message})`; }
  }
}

// waitRetryWindow(ctl, genAtSend) -> when a request sent in generation
// genAtSend got no answer, resolves once it is sensible to retry:
//   'restart'   - the server is up again in a newer generation (the request was
//                 in doubt across a crash);
//   'transient' - the server is still up in the same generation (after a backoff);
//   'fatal'     - the test is giving up.
async function waitRetryWindow(ctl, genAtSend) {
  for (;;) {
    if (ctl.fatal) return 'fatal';
    if (ctl.up && ctl.gen > genAtSend) return 'restart';
    if (ctl.up && ctl.gen === genAtSend) {
      await sleep(TRANSIENT_BACKOFF_MS);
      if (ctl.up && ctl.gen === genAtSend) return 'transient';
      continue;
    }
    await ctl.changed();
  }
}

// ------------------------------------------------------------------ writers

// A Writer is one idempotent producer appending to one stream in a closed
// loop. records[seq] = { body, msgs, acked } holds the exact body sent for seq
// (msgs: the JSON messages, for JSON streams). Invariant: records[0..acked-1]
// are acknowledged; at most the last record is not (only if the writer aborted).
class Writer {
  constructor({ stream, k, writersPerStream, seed, large = null, largeBudget = 0 }) {
    this.stream = stream;
    this.seed = seed;
    this.large = large;      // --large-append-bytes: odd seqs padded to [large, 4 * large] bytes
    this.largeBudget = largeBudget; // ... until the large records made reach this many bytes
    this.largeBytes = 0;
    this.label = writersPerStream === 1 ? `w${stream.idx}` : `w${stream.idx}.${k}`;
    this.wField = writersPerStream === 1 ? stream.idx : `${stream.idx}.${k}`; // "w" of JSON messages
    this.rng = makeRng(deriveSeed(seed, 'writer', stream.idx, k));
    this.records = [];
    this.acked = 0;
    this.issues = [];        // unexpected answers; make the stream's check fail
    this.abortedAt = null;   // seq at which the writer gave up, if it did
  }

  headers(seq) {
    return { 'Content-Type': this.stream.contentType, 'Producer-Id': this.label,
      'Producer-Epoch': '0', 'Producer-Seq': String(seq) };
  }

  // makeRecord(seq) -> the next self-identifying record for this writer.
  // With --large-append-bytes N every odd seq is a large record: its body
  // (binary) or the sum of its messages' pads (JSON) between N and 4N
  // bytes, so that its stored form is at least N; the padding is hex of
  // bytes derived from (seed, writer, seq) alone. Once the large records
  // made reach largeBudget bytes, every record is small.
  makeRecord(seq) {
    if (this.large && seq % 2 === 1 && this.largeBytes < this.largeBudget) {
      const rec = this.makeLargeRecord(seq);
      this.largeBytes += rec.body.length;
      rec.large = true;
      return rec;
    }
    if (!this.stream.json) {
      return { body: Buffer.from(`<${this.label}:${seq}:${this.rng.hex(this.rng.int(0, BIN_PAD_MAX))}>`, 'latin1'), msgs: null, acked: false };
    }
    const msgs = [];
    const n = this.rng.int(1, 3);
    for (let j = 0; j < n; j++) msgs.push({ w: this.wField, n: seq, k: j, pad: this.rng.hex(this.rng.int(0, JSON_PAD_MAX)) });
    return { body: JSON.stringify(msgs), msgs, acked: false };
  }

  makeLargeRecord(seq) {
    const total = this.large + deriveSeed(this.seed, 'large', this.label, seq) % (3 * this.large + 1); // [N, 4N]
    const pad = (n, part) => largePad(this.seed, this.label, seq, part, Math.max(0, n));
    if (!this.stream.json) {
      const head = `<${this.label}:${seq}:`;
      return { body: Buffer.from(`${head}${pad(total - head.length - 1, 0)}>`, 'latin1'), msgs: null, acked: false };
    }
    const msgs = [];
    const n = this.rng.int(1, 3);
    for (let j = 0; j < n; j++) msgs.push({ w: this.wField, n: seq, k: j, pad: pad(Math.ceil(total / n), j) });
    return { body: JSON.stringify(msgs), msgs, acked: false };
  }

  // run(ctl, control, stats): append new records until control.stop is set.
  // New requests are only started while the server is up; a request in doubt
  // is finished (see deliver) before the loop looks at control.stop again.
  async run(ctl, control, stats) {
    while (!control.stop && !ctl.fatal) {
      if (!ctl.up) { await ctl.changed(); continue; }
      const seq = this.records.length;
      const rec = this.makeRecord(seq);
      this.records.push(rec);
      if (!(await this.deliver(ctl, seq, rec, stats))) { this.abortedAt = seq; return; }
      rec.acked = true;
      this.acked++;
    }
  }

  // deliver(ctl, seq, rec, stats) -> true once the server acknowledged rec:
  // 200 on the first attempt, or 200/204 on a retry after a network failure.
  // Retries always resend the same producer headers and body. Returns false
  // (issue recorded) on any other answer, on too many transient failures, or
  // when the test is giving up.
  async deliver(ctl, seq, rec, stats) {
    let failed = false;        // some earlier attempt got no answer
    let crossedCrash = false;  // ... and the server was restarted since
    let transient = 0;
    for (;;) {
      const genAtSend = ctl.gen;
      let res;
      try {
        res = await http(ctl.base, 'POST', this.stream.path, { headers: this.headers(seq), body: rec.body });
      } catch (err) {
        if (!(err instanceof NetError)) throw err;
        failed = true;
        const why = await waitRetryWindow(ctl, genAtSend);
        if (why === 'fatal') return false;
        if (why === 'restart') crossedCrash = true;
        if (why === 'transient') {
          stats.transientRetries++;
          if (++transient > MAX_TRANSIENT_RETRIES) {
            this.issues.push(`${this.label} seq ${seq}: ${transient} network failures while the server was up (last: ${err.message})`);
            return false;
          }
        }
        continue;
      }
      const answeredGen = ctl.gen;
      if (!failed) {
        if (res.status === 200) return true;
        this.issues.push(`${this.label} seq ${seq}: first attempt answered ${describeAnswer(res)}, expected 200`);
        return false;
      }
      if (res.status === 200 || res.status === 204) {
        if (crossedCrash) {
          const r = stats.round(answeredGen);
          if (res.status === 200) { stats.inDoubt200++; r.retry200++; } else { stats.inDoubt204++; r.retry204++; }
        }
        return true;
      }
      const msg = `${this.label} seq ${seq}: ${crossedCrash ? 'in-doubt retry after restart' : 'retry after network error'} answered ${describeAnswer(res)}, expected 200 or 204`;
      this.issues.push(msg);
      if (crossedCrash) stats.round(answeredGen).issues.push(msg);
      return false;
    }
  }
}

// --------------------------------------------------------------------- main

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  console.log(`# seed ${opts.seed} (rerun with --seed ${opts.seed}); rounds ${opts.rounds}, streams ${opts.streams}, ` +
    `writers per stream ${opts.writersPerStream}, timeout ${opts.timeoutMs} ms`);

  const tmp = tempDir('runnel-crash-', { keep: true });
  let dataDir = path.join(tmp, 'data');
  let disk = null;
  if (opts.powerCut) {
    if (process.getuid() !== 0) {
      console.log('SKIP power cuts: they need root (a loop device and mount; CI runs as root)');
      fs.rmSync(tmp, { recursive: true, force: true });
      console.log('0 passed, 0 failed, 1 skipped');
      process.exit(0);
    }
    disk = new Disk({ image: path.join(tmp, 'disk.img'), mnt: path.join(tmp, 'mnt'), tool: opts.powerCut });
    disk.create(opts.imageMib);
    disk.attach();
    dataDir = path.join(disk.mnt, 'data');
    console.log(`# power cuts: data on ext4 in ${disk.image} (${opts.imageMib} MiB) on ${disk.dev}, cut by ${opts.powerCut}`);
  }
  fs.mkdirSync(dataDir);
  const logPath = path.join(tmp, 'server.log');
  const serverArgs = opts.largeAppendBytes ? ['--large-append-bytes', String(opts.largeAppendBytes)] : [];
  const ctl = new ServerCtl({ bin: opts.bin, port: await freePort(), dataDir, logPath, args: serverArgs });
  const cutName = disk ? 'power cut' : 'SIGKILL';
  // releaseDisk(): the server gone, the file system unmounted and its loop
  // device freed (retried while the killed server's files close).
  const releaseDisk = () => {
    if (!disk) return;
    for (let i = 0; ; i++) {
      try { disk.detach(); return; } catch (err) {
        if (i === 50) { console.log(`# could not release ${disk.mnt}: ${err.message}`); return; }
        spawnSync('sleep', ['0.1']);
      }
    }
  };
  const rng = makeRng(deriveSeed(opts.seed, 'controller'));
  const stats = {
    inDoubt200: 0, inDoubt204: 0, transientRetries: 0, rounds: new Map(), writtenOnce: 0, writtenOnceReads: 0,
    round(gen) { // per-generation counters; gen g+1 follows round g's restart
      if (!this.rounds.has(gen)) this.rounds.set(gen, { retry200: 0, retry204: 0, issues: [] });
      return this.rounds.get(gen);
    },
  };
  let phase = 'startup';
  let writers = [];

  // finish(): stats, summary line, cleanup; the only way out after setup.
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    const acked = writers.reduce((a, w) => a + w.acked, 0);
    const bytes = writers.reduce((a, w) => a + w.records.slice(0, w.acked).reduce((b, r) => b + r.body.length, 0), 0);
    console.log(`# rounds completed: ${Math.max(0, Math.min(opts.rounds, ctl.gen - 1))} of ${opts.rounds}`);
    console.log(`# acknowledged appends: ${acked} (${bytes} body bytes) by ${writers.length} writers`);
    if (opts.largeAppendBytes) {
      const large = writers.flatMap((w) => w.records.slice(0, w.acked).filter((r) => r.large));
      const spent = writers.filter((w) => w.largeBytes >= w.largeBudget).length;
      console.log(`# of them large (--large-append-bytes ${opts.largeAppendBytes}): ${large.length} ` +
        `(${large.reduce((a, r) => a + r.body.length, 0)} body bytes); writers past their budget of large bytes: ${spent}`);
    }
    console.log(`# in-doubt retries after restart: ${stats.inDoubt200} answered 200 (not applied before the crash), ` +
      `${stats.inDoubt204} answered 204 (applied before the crash)`);
    console.log(`# transient network retries while the server was up: ${stats.transientRetries}`);
    ctl.killNow();
    releaseDisk();
    if (checks.failed > 0) {
      console.log(`# server log tail (${logPath}):\n${ctl.logTail().replace(/^/gm, '#   ')}`);
      console.log(`# kept temp dir: ${tmp}`);
    } else {
      try { fs.rmSync(tmp, { recursive: true, force: true }); } catch (err) { console.log(`# could not remove ${tmp}: ${err.message}`); }
    }
    console.log(`${checks.passed} passed, ${checks.failed} failed`);
    process.exit(checks.failed === 0 ? 0 : 1);
  };

  process.on('exit', () => { ctl.killNow(); releaseDisk(); });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => { check('interrupted', [`received ${sig} during ${phase}`]); finish(); });
  }
  setTimeout(() => { check('overall timeout', [`exceeded ${opts.timeoutMs} ms during ${phase}`]); finish(); }, opts.timeoutMs).unref();

  // fatalCheck(): if the server died on its own, count it and stop here.
  // writtenOnce(): adds the running server's runnel_appends_written_once_total
  // (--large-append-bytes) to stats.writtenOnce; nothing when unanswered.
  const writtenOnce = async () => {
    try {
      const res = await http(ctl.base, 'GET', '/__runnel/metrics');
      const m = /^runnel_appends_written_once_total (\d+)$/m.exec(res.body.toString('utf8'));
      if (res.status === 200 && m) { stats.writtenOnce += Number(m[1]); stats.writtenOnceReads++; }
    } catch { /* the check after the rounds counts the reads */ }
  };
  const fatalCheck = () => { if (ctl.fatal) { check(`server (${phase})`, [ctl.fatal]); finish(); } };
  const sleepWatch = (ms) => Promise.race([sleep(ms), ctl.fatalSeen]); // sleep, cut short if the server dies

  try {
    // 1. start
    ctl.start();
    const t0 = await ctl.waitReady();
    if (!check('startup: server answers within 10 s', t0 === null ? [ctl.fatal ?? 'no HTTP answer within 10 s'] : [])) finish();

    // 2. create streams
    phase = 'create';
    const streams = [];
    for (let i = 0; i < opts.streams; i++) {
      const json = i % 2 === 1;
      streams.push({ idx: i, json, path: `/v1/stream/crash/s${i}`, contentType: json ? 'application/json' : 'application/octet-stream', writers: [] });
    }
    const createIssues = [];
    for (const s of streams) {
      try {
        const res = await http(ctl.base, 'PUT', s.path, { headers: { 'Content-Type': s.contentType } });
        if (res.status !== 201) createIssues.push(`PUT ${s.path} answered ${describeAnswer(res)}, expected 201`);
      } catch (err) { createIssues.push(`PUT ${s.path}: no answer (${err.message})`); }
    }
    if (!check(`create ${streams.length} streams`, createIssues)) finish();

    // 3. writers
    phase = 'writing';
    const largeBudget = Math.floor(opts.imageMib * 2 ** 20 / 4 / (opts.streams * opts.writersPerStream));
    for (const s of streams) {
      for (let k = 0; k < opts.writersPerStream; k++) {
        s.writers.push(new Writer({ stream: s, k, writersPerStream: opts.writersPerStream, seed: opts.seed,
          large: opts.largeAppendBytes, largeBudget }));
      }
    }
    writers = streams.flatMap((s) => s.writers);
    const control = { stop: false };
    const runs = writers.map((w) => w.run(ctl, control, stats).catch((err) => { w.issues.push(`internal error: ${err.stack}`); w.abortedAt = w.records.length - 1; }));

    // 4. crash rounds
    const roundIssues = [];
    for (let r = 1; r <= opts.rounds; r++) {
      phase = `round ${r}`;
      const delay = rng.int(KILL_DELAY_MIN_MS, KILL_DELAY_MAX_MS);
      await sleepWatch(delay);
      fatalCheck();
      const issues = [];
      const ackedBefore = writers.reduce((a, w) => a + w.acked, 0);
      if (opts.largeAppendBytes) await writtenOnce();
      if (disk) {
        // frozen first, so that nothing is answered after the cut
        ctl.child.kill('SIGSTOP');
        disk.cut();
      }
      const ex = await ctl.stop('SIGKILL');
      if (ex === null) issues.push(`server did not exit within ${EXIT_TIMEOUT_MS / 1000} s of SIGKILL`);
      else if (ex.signal !== 'SIGKILL') issues.push(`server exit code=${ex.code} signal=${ex.signal}, expected signal SIGKILL`);
      if (disk) {
        releaseDisk();
        disk.attach();
      }
      ctl.start();
      const ready = await ctl.waitReady();
      console.log(`# round ${r}: ${cutName} after ${delay} ms (${ackedBefore} appends acknowledged so far), ` +
        `restart ${ready === null ? 'FAILED' : `ready in ${ready} ms`}`);
      roundIssues[r] = issues;
      if (ready === null) {
        issues.push(ctl.fatal ?? `no HTTP answer within ${READY_TIMEOUT_MS / 1000} s of restart`);
        check(`round ${r}: ${cutName}, restart, in-doubt retries`, issues);
        finish();
      }
    }
    phase = 'stopping writers';
    await sleepWatch(TAIL_AFTER_LAST_ROUND_MS);
    control.stop = true;
    const stopped = await Promise.race([Promise.all(runs).then(() => true), sleep(WRITER_STOP_TIMEOUT_MS).then(() => false)]);
    fatalCheck();
    if (!stopped) { check('writers stop', [`writers still busy ${WRITER_STOP_TIMEOUT_MS / 1000} s after stop`]); finish(); }
    for (let r = 1; r <= opts.rounds; r++) {
      const g = stats.round(r + 1);
      console.log(`# round ${r}: in-doubt retries answered 200: ${g.retry200}, 204: ${g.retry204}`);
      check(`round ${r}: ${cutName}, restart, in-doubt retries`, [...roundIssues[r], ...g.issues]);
    }

    // the large records took the path: the server counted appends written
    // once (its counter starts at 0 with each start: summed over the
    // generations, read before each cut and before the graceful stop)
    if (opts.largeAppendBytes) {
      phase = 'metrics';
      await writtenOnce();
      const large = writers.reduce((a, w) => a + w.records.slice(0, w.acked).filter((r) => r.large).length, 0);
      console.log(`# appends written once, as the server counted them: ${stats.writtenOnce} ` +
        `(large records acknowledged: ${large}; metrics read ${stats.writtenOnceReads} times)`);
      check(`large appends written once (--large-append-bytes ${opts.largeAppendBytes})`,
        stats.writtenOnce > 0 ? [] : [`runnel_appends_written_once_total was 0 in every generation (${stats.writtenOnceReads} read)`]);
    }

    // 5. graceful stop and final restart
    phase = 'graceful stop';
    const ex = await ctl.stop('SIGTERM');
    check('graceful stop: SIGTERM -> exit code 0 within 10 s',
      ex === null ? [`no exit within ${EXIT_TIMEOUT_MS / 1000} s (SIGKILLed)`]
        : ex.code === 0 ? [] : [`exit code=${ex.code} signal=${ex.signal}`]);
    phase = 'final restart';
    ctl.start();
    const tf = await ctl.waitReady();
    if (!check('final restart: server answers within 10 s', tf === null ? [ctl.fatal ?? 'no HTTP answer within 10 s'] : [])) finish();

    // 6. verification
    phase = 'verification';
    for (const s of streams) {
      const { issues, nextOffset } = await verifyStream(ctl.base, s);
      check(`content ${s.path} (${s.json ? 'json' : 'binary'})`, issues);
      for (const w of s.writers) check(`dedup ${s.path} ${w.label}`, await verifyDedup(ctl.base, w));
      check(`head ${s.path}`, await verifyHead(ctl.base, s, nextOffset));
    }
    fatalCheck();
    phase = 'final stop';
    await ctl.stop('SIGTERM');
  } catch (err) {
    check(`internal error (${phase})`, [err.stack ?? String(err)]);
  }
  finish();
}

main().catch((err) => {
  console.log(`FAIL internal error: ${err.stack ?? err}`);
  console.log('0 passed, 1 failed');
  process.exit(1);
});
