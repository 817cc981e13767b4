#!/usr/bin/env node
// fault_test.mjs - storage faults: failed log syncs and a full disk.
//
// WHAT IT PROVES
//   Failed syncs (test hook POST /__runnel/test/fail-syncs?n=N: the next N
//   log batches fail as if fdatasync returned EIO):
//     - every write of a failed batch (append with and without producer,
//       create, close, delete) answers 503 with Retry-After and the error
//       code OUTCOME_UNKNOWN, and nothing of it applies: reads, HEAD and
//       parked long-polls never see it;
//     - reads keep working while syncs fail, and the next write succeeds
//       (a producer's retry of the failed seq answers 200: it was not
//       applied before);
//     - with concurrent writers to many streams only the failed batches'
//       writes are missing;
//     - after SIGKILL and after SIGTERM, recovery yields exactly the
//       acknowledged state (the failed records never reappear).
//     - every failed batch is logged at error level with its errno (one
//       "Input/output error" line per failed batch);
//   Full disk (a 48 MiB tmpfs mounted as the data directory; needs root:
//   without it counted as skipped, with the reason, in the closing line; as
//   root a mount that fails is a failure), twice: with 1 MiB
//   log segments and checkpoint interval, and with the defaults (64 MiB
//   segments: no spare segment fits the disk):
//     - with the disk filled up by another file while producers append,
//       every write is acknowledged or refused with 503 WAL_DISK_PRESSURE
//       (refused before anything was logged: the log reserves the space of
//       a batch before writing it, stream files theirs before submitting),
//       never OUTCOME_UNKNOWN, never acknowledged without being readable,
//       never another code, never a crash; WAL_DISK_PRESSURE is seen, and
//       the refusals are logged at error level with their errno;
//     - right after each refusal the stream holds exactly the acknowledged
//       records (nothing of the refused write applied);
//     - reads (catch-up, HEAD) keep answering 200 with the acknowledged data;
//     - once the file is removed, writes resume within 10 s;
//     - a SIGKILL while the disk is full, then a restart, keeps every
//       acknowledged record; the producers' retries resolve the writes that
//       were in doubt to exactly once; a final SIGKILL + restart and a
//       SIGTERM + restart still hold exactly the acknowledged records.
//   Readiness (test hook POST /__runnel/test/fail?point=data-read&n=N: the
//   next N reads of the data directory fail with EIO, as on a file system
//   whose device fails reads; n=1000000 for "every read", n=0 to stop):
//     - /__runnel/readyz answers 200, then 503 with a body naming the data
//       directory's read failure within 5 s of the reads failing, and 200
//       again within 5 s of them working; livez stays 200 throughout;
//     - a stream read meanwhile answers 5xx, never 200 with wrong bytes.
//
// OUTPUT: "FAIL ..." lines, "# ..." figures, last line "N passed, M failed".
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {
  Checks, Server, http, mountTmpfs, parseArgs, readAll, recordBody, tempDir, sleep, umount,
} from "./lib.mjs";

const USAGE = "usage: node tests/faults/fault_test.mjs --bin build/runnel [--skip-full-disk] [--full-seconds 3]";
const opts = parseArgs(process.argv.slice(2), { bin: "build/runnel", skipFullDisk: false, fullSeconds: 3 }, USAGE);
let injectedFailures = 0; // batches made to fail through the test hook
const checks = new Checks();
const T = "text/plain";

const failSyncs = (srv, n) => {
  injectedFailures += n;
  return http(`${srv.url}/__runnel/test/fail-syncs?n=${n}`, { method: "POST" });
};
// Error-level lines of a server log (text or JSON format).
const errorLines = (log) => log.split("\n").filter((l) => / error /.test(l) || /"level":"error"/.test(l));
const producerHeaders = (id, seq) => ({ "content-type": T, "producer-id": id, "producer-epoch": "0", "producer-seq": String(seq) });
const is503 = (r, code) => r.status === 503 && r.code() === code && r.headers.get("retry-after") !== null;
const describe = (r) => `${r.status} ${r.text.slice(0, 160)}`;

// ====================================================================== failed syncs

async function failedSyncs(root) {
  fs.mkdirSync(root, { recursive: true });
  const srv = new Server({ bin: opts.bin, dataDir: path.join(root, "data"), args: ["--test-hooks", "--long-poll-timeout-ms", "5000"], logPath: path.join(root, "server.log") });
  await srv.start();
  const u = (n) => `${srv.url}/v1/stream/faults/${n}`;
  const model = new Map(); // stream -> Buffer of acknowledged content
  const append = async (name, body, headers = { "content-type": T }) => {
    const r = await http(u(name), { method: "POST", headers, body });
    if (r.status === 200 || r.status === 204) model.set(name, Buffer.concat([model.get(name) ?? Buffer.alloc(0), Buffer.from(body)]));
    return r;
  };
  const same = async (name, what) => {
    const r = await readAll(u(name));
    return checks.check(what, r.body.equals(model.get(name)), `${name} holds ${JSON.stringify(r.body.toString().slice(-80))}, expected ${JSON.stringify(model.get(name).toString().slice(-80))}`);
  };
  try {
    checks.check("sync: create s1", (await http(u("s1"), { method: "PUT", headers: { "content-type": T } })).status === 201);
    model.set("s1", Buffer.alloc(0));
    for (let seq = 0; seq < 5; seq++) await append("s1", recordBody("p", seq), producerHeaders("p", seq));
    await same("s1", "sync: acknowledged appends readable");
    const head0 = await http(u("s1"), { method: "HEAD" });

    // producer append in a failed batch
    checks.check("sync: fail-syncs hook answers 204", (await failSyncs(srv, 1)).status === 204);
    let r = await append("s1", recordBody("p", 5), producerHeaders("p", 5));
    checks.check("sync: producer append in a failed batch answers 503 OUTCOME_UNKNOWN + Retry-After", is503(r, "OUTCOME_UNKNOWN"), describe(r));
    await same("s1", "sync: failed append not applied (read)");
    const head1 = await http(u("s1"), { method: "HEAD" });
    checks.check("sync: failed append not applied (HEAD tail)", head1.headers.get("stream-next-offset") === head0.headers.get("stream-next-offset"));
    r = await append("s1", recordBody("p", 5), producerHeaders("p", 5));
    checks.check("sync: producer retry of the failed seq answers 200 (it was not applied)", r.status === 200, describe(r));
    await same("s1", "sync: retry applied once");

    // plain append
    await failSyncs(srv, 1);
    r = await append("s1", "lost-plain");
    checks.check("sync: plain append in a failed batch answers 503 OUTCOME_UNKNOWN", is503(r, "OUTCOME_UNKNOWN"), describe(r));
    r = await append("s1", "kept-plain");
    checks.check("sync: next append succeeds", r.status === 204, describe(r));
    await same("s1", "sync: only the successful plain append applied");

    // create
    await failSyncs(srv, 1);
    r = await http(u("s2"), { method: "PUT", headers: { "content-type": T }, body: "initial" });
    checks.check("sync: create in a failed batch answers 503 OUTCOME_UNKNOWN", is503(r, "OUTCOME_UNKNOWN"), describe(r));
    r = await http(u("s2"), { method: "HEAD" });
    checks.check("sync: failed create left no stream (HEAD 404)", r.status === 404, describe(r));
    r = await http(u("s2"), { method: "PUT", headers: { "content-type": T }, body: "initial" });
    checks.check("sync: create after the failure answers 201", r.status === 201, describe(r));
    model.set("s2", Buffer.from("initial"));

    // close
    await failSyncs(srv, 1);
    r = await http(u("s2"), { method: "POST", headers: { "stream-closed": "true" } });
    checks.check("sync: close in a failed batch answers 503 OUTCOME_UNKNOWN", is503(r, "OUTCOME_UNKNOWN"), describe(r));
    r = await http(u("s2"), { method: "HEAD" });
    checks.check("sync: failed close left the stream open", r.status === 200 && r.headers.get("stream-closed") === null, describe(r));
    r = await append("s2", "+more");
    checks.check("sync: append after a failed close succeeds", r.status === 204, describe(r));

    // delete
    await failSyncs(srv, 1);
    r = await http(u("s2"), { method: "DELETE" });
    checks.check("sync: delete in a failed batch answers 503 OUTCOME_UNKNOWN", is503(r, "OUTCOME_UNKNOWN"), describe(r));
    await same("s2", "sync: failed delete left the stream and its data");

    // a parked long-poll never sees a failed append
    const tail = (await http(u("s1"), { method: "HEAD" })).headers.get("stream-next-offset");
    const poll = http(`${u("s1")}?offset=${tail}&live=long-poll`, { timeoutMs: 10000 });
    await sleep(100);
    await failSyncs(srv, 1);
    r = await append("s1", "never-seen");
    checks.check("sync: append while a long-poll is parked answers 503", is503(r, "OUTCOME_UNKNOWN"), describe(r));
    await sleep(100);
    r = await append("s1", "seen");
    const p = await poll;
    checks.check("sync: the parked long-poll wakes with the next good append only", p.status === 200 && p.text === "seen", describe(p));

    // reads keep working while every sync fails
    await failSyncs(srv, 6);
    let refused = 0, reads = 0;
    for (let i = 0; i < 6; i++) {
      const w = await append("s1", `fail-${i}`);
      if (is503(w, "OUTCOME_UNKNOWN")) refused++;
      const rd = await http(`${u("s1")}?offset=-1`);
      if (rd.status === 200) reads++;
    }
    checks.check("sync: 6 failed batches, 6 refusals", refused === 6, `${refused} refusals`);
    checks.check("sync: reads answer 200 between failed syncs", reads === 6, `${reads} of 6`);
    await same("s1", "sync: no failed append applied");

    // concurrent writers: only the failed batches' writes are missing
    for (let i = 0; i < 10; i++) {
      await http(u(`c${i}`), { method: "PUT", headers: { "content-type": T } });
      model.set(`c${i}`, Buffer.alloc(0));
    }
    let failedWrites = 0, okWrites = 0, other = [];
    for (let round = 0; round < 6; round++) {
      if (round % 2 === 0) await failSyncs(srv, 1);
      const rs = await Promise.all(Array.from({ length: 10 }, (_, i) => append(`c${i}`, `<c${i}:${round}>`)));
      for (const x of rs) {
        if (x.status === 204) okWrites++;
        else if (is503(x, "OUTCOME_UNKNOWN")) failedWrites++;
        else other.push(describe(x));
      }
    }
    checks.check("sync: concurrent writers see only 204 or 503 OUTCOME_UNKNOWN", other.length === 0, other.join("; "));
    checks.check("sync: some concurrent writes failed and some succeeded", failedWrites > 0 && okWrites > 0, `${failedWrites} failed, ${okWrites} ok`);
    const concurrentIssues = [];
    for (let i = 0; i < 10; i++) {
      const got = (await readAll(u(`c${i}`))).body;
      if (!got.equals(model.get(`c${i}`))) concurrentIssues.push(`c${i}: ${got} vs ${model.get(`c${i}`)}`);
    }
    checks.check("sync: concurrent streams hold exactly their acknowledged writes", concurrentIssues);
    console.log(`# failed syncs: ${failedWrites} concurrent writes refused, ${okWrites} acknowledged`);

    // recovery: SIGKILL, then SIGTERM
    for (const sig of ["SIGKILL", "SIGTERM"]) {
      const ex = await srv.stop(sig);
      checks.check(`sync: ${sig} stop`, sig === "SIGKILL" ? ex.signal === "SIGKILL" : ex.code === 0, JSON.stringify(ex));
      await srv.start();
      const issues = [];
      for (const [name, want] of model) {
        const got = (await readAll(u(name))).body;
        if (!got.equals(want)) issues.push(`${name}: ${JSON.stringify(got.toString().slice(-60))} vs ${JSON.stringify(want.toString().slice(-60))}`);
      }
      checks.check(`sync: after ${sig} + restart exactly the acknowledged state`, issues);
    }
    r = await append("s1", recordBody("p", 6), producerHeaders("p", 6));
    checks.check("sync: producer continues after restarts (seq 6 answers 200)", r.status === 200, describe(r));
    const logged = errorLines(fs.readFileSync(srv.logPath, "utf8")).filter((l) => l.includes("Input/output error"));
    checks.check(`sync: each of the ${injectedFailures} failed batches is logged at error level with its errno`,
      logged.length === injectedFailures, `${logged.length} such lines: ${logged.slice(0, 2).join(" | ")}`);
  } finally {
    await srv.stop("SIGTERM");
  }
}

// ====================================================================== readiness

async function readiness(root) {
  fs.mkdirSync(root, { recursive: true });
  const srv = new Server({ bin: opts.bin, dataDir: path.join(root, "data"), args: ["--test-hooks"], logPath: path.join(root, "server.log") });
  await srv.start();
  const ready = () => http(`${srv.url}/__runnel/readyz`);
  const failReads = (on) => http(`${srv.url}/__runnel/test/fail?point=data-read&n=${on ? 1000000 : 0}`, { method: "POST" });
  // waits (bounded) until readyz answers `status`; returns the last answer
  const readyzBecomes = async (status) => {
    let r;
    for (const t0 = Date.now(); Date.now() - t0 < 5000; await sleep(100)) {
      r = await ready();
      if (r.status === status) break;
    }
    return r;
  };
  try {
    const s = `${srv.url}/v1/stream/ready/s`;
    await http(s, { method: "PUT", headers: { "content-type": T }, body: "some bytes" });
    let r = await ready();
    checks.check("ready: readyz answers 200 on a healthy data directory", r.status === 200, describe(r));
    r = await failReads(1);
    checks.check("ready: the data-read failure point's hook answers 204", r.status === 204, describe(r));
    if (r.status === 204) {
      r = await readyzBecomes(503);
      checks.check("ready: readyz answers 503 naming the read failure within 5 s of the data directory failing reads",
        r.status === 503 && /data directory/.test(r.text) && /Input\/output error/.test(r.text), describe(r));
      r = await http(`${srv.url}/__runnel/livez`);
      checks.check("ready: livez still answers 200", r.status === 200, describe(r));
      r = await http(`${s}?offset=-1`);
      checks.check("ready: a stream read answers 5xx while reads fail", r.status >= 500, describe(r));
      await failReads(0);
      r = await readyzBecomes(200);
      checks.check("ready: readyz answers 200 again within 5 s of reads working", r.status === 200, describe(r));
      r = await http(`${s}?offset=-1`);
      checks.check("ready: the stream reads again", r.status === 200 && r.text === "some bytes", describe(r));
    }
  } finally {
    await srv.stop("SIGTERM");
  }
}

// ====================================================================== full disk

// A producer appending records of 2..12 KiB in a closed loop. On a 503 it
// checks that the stream still holds exactly its acknowledged records, then
// retries the same seq (after 50 ms) until it is acknowledged.
class Writer {
  constructor(srv, name, idx) {
    Object.assign(this, { srv, name, idx });
    this.acked = 0;
    this.refusals = new Map(); // code -> count
    this.issues = [];
    this.stop = false;
    this.down = false;
    this.lastAckAt = 0;
  }
  url() { return `${this.srv.url}/v1/stream/disk/${this.name}`; }
  body(seq) {
    const pad = 2048 + ((seq * 7919 + this.idx * 104729) % 10240);
    const head = recordBody(this.name, seq, 7, 40);
    return Buffer.concat([head, Buffer.alloc(pad, 0x61 + (seq % 26))]);
  }
  expected(n = this.acked) {
    const parts = [];
    for (let s = 0; s < n; s++) parts.push(this.body(s));
    return Buffer.concat(parts);
  }
  async run() {
    while (!this.stop) {
      if (this.down) { await sleep(20); continue; }
      const seq = this.acked;
      let r;
      try {
        r = await http(this.url(), { method: "POST", headers: producerHeaders(this.name, seq), body: this.body(seq), timeoutMs: 15000 });
      } catch {
        await sleep(50); // the server is being restarted: retry the same seq
        continue;
      }
      if (r.status === 200 || r.status === 204) {
        this.acked++;
        this.lastAckAt = Date.now();
        continue;
      }
      const code = r.code();
      this.refusals.set(code, (this.refusals.get(code) ?? 0) + 1);
      if (r.status !== 503 || code !== "WAL_DISK_PRESSURE" || !r.headers.get("retry-after")) {
        this.issues.push(`seq ${seq} answered ${describe(r)}`);
        await sleep(50);
        continue;
      }
      // nothing of the refused write applied
      try {
        const got = await readAll(this.url());
        if (!got.body.equals(this.expected())) this.issues.push(`after a ${code} refusal of seq ${seq} the stream holds ${got.body.length} bytes, expected ${this.expected().length}`);
      } catch (e) {
        if (!this.down) this.issues.push(`read after a refusal failed: ${e.message}`); // else: killed on purpose
      }
      await sleep(50);
    }
  }
}

// Fills the file system at dir with one file until ENOSPC; returns its path.
function fillDisk(dir) {
  const p = path.join(dir, "filler.bin");
  const fd = fs.openSync(p, "w");
  const chunk = Buffer.alloc(1 << 20, 0x5a);
  let written = 0;
  try {
    for (;;) {
      let n = chunk.length;
      while (n >= 4096) {
        try { fs.writeSync(fd, chunk, 0, n); written += n; break; } catch (e) {
          if (e.code !== "ENOSPC") throw e;
          n >>= 1;
        }
      }
      if (n < 4096) break;
    }
  } finally {
    fs.closeSync(fd);
  }
  return { path: p, bytes: written };
}

async function fullDisk(root, label, serverArgs) {
  const mnt = path.join(root, `mnt-${label}`);
  if (process.getuid() !== 0) {
    checks.skip(`full disk (${label})`, "mounting a 48 MiB tmpfs needs root (CI runs as root)");
    return;
  }
  const mounted = await mountTmpfs(mnt, 48);
  if (!checks.check(`full disk (${label}): a 48 MiB tmpfs mounts (root)`, mounted === true, mounted)) return;
  const dataDir = path.join(mnt, "data");
  const srv = new Server({ bin: opts.bin, dataDir, logPath: path.join(root, `server-disk-${label}.log`), args: serverArgs });
  // interrupted (a CI timeout, ^C): kill the server and unmount lazily,
  // which detaches the tmpfs even while something still holds it
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.prependOnceListener(sig, () => {
      srv.killNow();
      spawnSync("umount", ["-l", mnt]);
      console.log(`# interrupted by ${sig}; ${mnt} unmounted`);
      console.log(`${checks.passed} passed, ${checks.failed + 1} failed`);
      process.exit(1);
    });
  }
  const writers = [];
  const readerStats = { ok: 0, bad: [] };
  let readers = null;
  let stopReaders = false;
  try {
    await srv.start();
    for (let i = 0; i < 4; i++) {
      const w = new Writer(srv, `w${i}`, i);
      const r = await http(w.url(), { method: "PUT", headers: { "content-type": T } });
      checks.check(`disk ${label}: create ${w.name}`, r.status === 201, describe(r));
      writers.push(w);
    }
    const runs = writers.map((w) => w.run());
    // readers: every stream, every 50 ms, must answer 200 with at least the
    // records acknowledged before the read and nothing unacknowledged
    readers = (async () => {
      while (!stopReaders) {
        for (const w of writers) {
          if (w.down) continue;
          const before = w.acked;
          try {
            const got = (await readAll(w.url())).body;
            const after = w.acked;
            const ok = got.length >= w.expected(before).length && got.equals(w.expected(after + 1).subarray(0, got.length));
            if (ok) readerStats.ok++;
            else readerStats.bad.push(`${w.name}: ${got.length} bytes, acked ${before}..${after}`);
          } catch (e) {
            if (!w.down) readerStats.bad.push(`${w.name}: ${e.message.slice(0, 120)}`);
          }
        }
        await sleep(50);
      }
    })();
    await sleep(500);

    // phase 1: fill, hold full, free
    for (let phase = 1; phase <= 2; phase++) {
      const fill = fillDisk(mnt);
      const refusedBefore = writers.reduce((a, w) => a + [...w.refusals.values()].reduce((x, y) => x + y, 0), 0);
      const t0 = Date.now();
      // wait until every writer is refused (bounded), then hold
      while (Date.now() - t0 < 20000 && writers.some((w) => Date.now() - w.lastAckAt < 500)) await sleep(100);
      const stalled = writers.every((w) => Date.now() - w.lastAckAt >= 500);
      checks.check(`disk ${label}: phase ${phase}: writes stop being acknowledged on a full disk (filler ${fill.bytes >> 20} MiB)`, stalled,
        writers.map((w) => `${w.name} last ack ${Date.now() - w.lastAckAt} ms ago`).join(", "));
      const headOk = [];
      for (const w of writers) headOk.push((await http(w.url(), { method: "HEAD" })).status);
      checks.check(`disk ${label}: phase ${phase}: HEAD answers 200 on a full disk`, headOk.every((s) => s === 200), headOk.join(","));
      const pc = await http(`${srv.url}/v1/stream/disk/new-${phase}`, { method: "PUT", headers: { "content-type": T }, body: Buffer.alloc(200000, 0x62) });
      checks.check(`disk ${label}: phase ${phase}: a create with data on a full disk answers 201 or 503 WAL_DISK_PRESSURE`,
        pc.status === 201 || is503(pc, "WAL_DISK_PRESSURE"), describe(pc));
      if (pc.status === 503) {
        const h = await http(`${srv.url}/v1/stream/disk/new-${phase}`, { method: "HEAD" });
        checks.check(`disk ${label}: phase ${phase}: the refused create left no stream`, h.status === 404, describe(h));
      } else {
        await http(`${srv.url}/v1/stream/disk/new-${phase}`, { method: "DELETE" });
      }
      await sleep(opts.fullSeconds * 1000);
      if (phase === 2) {
        // SIGKILL while full, restart while still full
        for (const w of writers) w.down = true;
        await srv.stop("SIGKILL");
        let startedFull = true;
        try { await srv.start({ readyMs: 15000 }); } catch (e) { startedFull = false; console.log(`# the server did not start on the full disk: ${e.message.split("\n")[0]}`); }
        checks.check(`disk ${label}: the server restarts on a full disk and serves reads`, startedFull);
        if (startedFull) {
          const issues = [];
          for (const w of writers) {
            const got = (await readAll(w.url())).body;
            // acked records all there; at most the one in doubt beyond
            if (!(got.length >= w.expected().length && got.equals(w.expected(w.acked + 1).subarray(0, got.length)))) issues.push(`${w.name}: ${got.length} bytes, ${w.acked} acknowledged`);
          }
          checks.check(`disk ${label}: after SIGKILL on a full disk every acknowledged record is there, nothing else`, issues);
        }
      }
      fs.rmSync(fill.path);
      if (phase === 2 && !srv.alive()) await srv.start();
      for (const w of writers) w.down = false;
      const refusals = writers.reduce((a, w) => a + [...w.refusals.values()].reduce((x, y) => x + y, 0), 0) - refusedBefore;
      checks.check(`disk ${label}: phase ${phase}: refusals observed while full`, refusals > 0, "no 503 at all");
      const ackedAtFree = writers.map((w) => w.acked);
      const tf = Date.now();
      while (Date.now() - tf < 10000 && writers.some((w, i) => w.acked < ackedAtFree[i] + 3)) await sleep(50);
      checks.check(`disk ${label}: phase ${phase}: writes resume within 10 s of freeing space`, writers.every((w, i) => w.acked >= ackedAtFree[i] + 3),
        writers.map((w, i) => `${w.name} +${w.acked - ackedAtFree[i]}`).join(", "));
      console.log(`# full disk ${label} phase ${phase}: ${refusals} refusals (${writers.map((w) => [...w.refusals].map(([c, n]) => `${c}=${n}`).join("/")).join(", ")}), ` +
        `writes resumed after ${Date.now() - tf} ms`);
      await sleep(500);
    }
    stopReaders = true;
    await readers;
    for (const w of writers) w.stop = true;
    await Promise.all(runs);
    checks.check(`disk ${label}: reads during the run answered 200 with consistent data`, readerStats.bad.length === 0 && readerStats.ok > 0,
      `${readerStats.ok} good, ${readerStats.bad.length} bad: ${readerStats.bad.slice(0, 3).join("; ")}`);
    for (const w of writers) checks.check(`disk ${label}: ${w.name} saw only 2xx or 503 WAL_DISK_PRESSURE`, w.issues);
    const byCode = new Map();
    for (const w of writers) for (const [code, n] of w.refusals) byCode.set(code, (byCode.get(code) ?? 0) + n);
    checks.check(`disk ${label}: every refusal on a full disk is WAL_DISK_PRESSURE (nothing was logged), none OUTCOME_UNKNOWN`,
      (byCode.get("WAL_DISK_PRESSURE") ?? 0) > 0 && byCode.size === 1,
      `codes seen: ${[...byCode].map(([c, n]) => `${c}=${n}`).join(", ")}`);
    const spaceLines = errorLines(fs.readFileSync(srv.logPath, "utf8")).filter((l) => l.includes("No space left on device"));
    checks.check(`disk ${label}: the refusals are logged at error level with their errno`, spaceLines.length > 0, "no error line says \"No space left on device\"");
    console.log(`# full disk ${label}: ${readerStats.ok} consistent reads; acknowledged appends ${writers.map((w) => w.acked).join(", ")}`);

    // recovery: exactly the acknowledged records, dedup state intact
    for (const sig of ["SIGKILL", "SIGTERM"]) {
      const ex = await srv.stop(sig);
      if (sig === "SIGTERM") checks.check(`disk ${label}: graceful stop exits 0`, ex.code === 0, JSON.stringify(ex));
      await srv.start();
      const issues = [];
      for (const w of writers) {
        const got = (await readAll(w.url())).body;
        if (!got.equals(w.expected())) issues.push(`${w.name}: ${got.length} bytes, expected ${w.expected().length}`);
        const dup = await http(w.url(), { method: "POST", headers: producerHeaders(w.name, w.acked - 1), body: w.body(w.acked - 1) });
        if (dup.status !== 204) issues.push(`${w.name}: duplicate of the last seq answered ${dup.status}`);
      }
      checks.check(`disk ${label}: after ${sig} + restart exactly the acknowledged records, producers dedup`, issues);
    }
  } finally {
    stopReaders = true;
    for (const w of writers) w.stop = true;
    await srv.stop("SIGKILL");
    const ok = await umount(mnt);
    if (!ok) console.log(`# warning: ${mnt} needed a lazy unmount`);
  }
}

async function main() {
  const t0 = Date.now();
  const root = tempDir("runnel-faults-", { keep: true });
  let keep = false;
  try {
    await failedSyncs(path.join(root, "sync"));
    await readiness(path.join(root, "ready"));
    if (opts.skipFullDisk) checks.skip("full disk", "--skip-full-disk");
    else {
      await fullDisk(root, "small-segments", ["--wal-segment-bytes", "1048576", "--checkpoint-bytes", "1048576"]);
      await fullDisk(root, "defaults", []);
    }
  } catch (e) {
    checks.check("internal error", false, e.stack);
  }
  keep = checks.failed > 0;
  console.log(`# runtime ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  if (keep) console.log(`# kept ${root}`);
  else fs.rmSync(root, { recursive: true, force: true });
  process.exit(checks.summary());
}

main();
