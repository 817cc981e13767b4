#!/usr/bin/env node
// killpoints_test.mjs - crash recovery at chosen points of the commit path.
//
// WHAT IT PROVES
//   For every kill point of the server (src/util/fault.h: the log write and
//   sync, the spare-segment rename, apply before the stream file write, the
//   checkpoint steps, snapshot publish after the blob, parts commit after the
//   assembly, retention before/after the hole punch, delete before/after the
//   file removal, history moving to the cold store: before and after the
//   object's put, after the move is recorded, before and after the stream
//   file's hole punch; the sweeps: before and after a staged part or cold
//   object is unlinked, before and after the orphan sweep's removal; a large
//   append written once: its body written to the stream file, then synced
//   there, before its log record), several pass counts N, and the
//   operations create (plain, JSON, empty, fork, created closed), append
//   (producer and plain, binary and JSON), close (with and without data),
//   delete (plain, re-create, fork source soft delete, last fork releasing
//   its source), snapshot publish (small, cold-store sized, parts commit),
//   retention and appends to streams whose history moves to the (local)
//   cold store (read back through the read cache after the restart), and
//   sweeps of staged parts no commit uses and of history objects of streams
//   that are gone (planted) while snapshots are published, and large
//   appends written once (--large-append-bytes 4096: creates of
//   5,000-40,000 bytes and some below 4096, binary appends large and small
//   to one stream, with and without producer headers, some of 64 KiB and
//   more, written while their body arrives, JSON appends whose
//   stored form is large, and a stream that took large appends deleted and
//   created again at its name with large appends; their log holds reference
//   records naming the range and its block checksums, not the bytes):
//     - the server dies (SIGKILL by itself) at the Nth pass of the point;
//     - restarted without the kill point on the same data directory, it
//       serves within 15 s and holds exactly the acknowledged state: for
//       each stream its existence (200/404/410), tail, closed flag, retained
//       offset, every byte from the retained offset to the tail, and its
//       latest snapshot's offset and body;
//     - the one operation each client had in flight when the server died is
//       either wholly applied or not at all (the state equals the model
//       without it or with it), so an unacknowledged write appears at most
//       once;
//     - the recovered server accepts writes again and stops gracefully
//       (after a "large" case: appends of both sizes to the streams the
//       kill interrupted, read back exact);
//     - after a sweep case, the recovered server removes every stale part
//       and planted history object within 10 s;
//     - a second crash during recovery (the replay of a log left by a
//       SIGKILL: apply before the stream-file write, retention before/after
//       the hole punch, delete before/after the file removal) loses nothing
//       either: the next recovery yields the same acknowledged state; also
//       for a log of reference records (killed while restoring a large
//       append's checksums and index entry, or after the files of a stream
//       whose reference records come earlier in the log were removed).
//
// HOW
//   For each operation kind a template data directory is prepared once by an
//   unarmed server (streams the workload needs, then SIGTERM: a checkpoint,
//   so recovery replays nothing). Each case copies the template, starts the
//   server with RUNNEL_FAULT_KILL_AT=point:N (passes counted from that start),
//   and runs three clients doing the operation kind plus a filler client
//   appending 64 KiB records (log volume, so segment rotations and
//   checkpoints happen: --wal-segment-bytes and --checkpoint-bytes are 1 MiB;
//   for "large", 4000-byte records, below its threshold, so that they still
//   go through the log).
//   Every client keeps a model of its own streams and at most one request in
//   flight. The "recovery" and "recovery-large" cases start from a template
//   left by SIGKILL with every operation still in the log (no checkpoint)
//   and arm the replay. Data directories live in /dev/shm when possible: a
//   SIGKILL keeps the page cache, so tmpfs proves the same as a disk,
//   faster (that the data file's sync of a large append is real, as the
//   log's, is the power-cut test's: tests/crash/crash_test.mjs).
//
// OUTPUT: "FAIL ..." per failed case, a "# ..." summary, and the last line
// "N passed, M failed" (one check per case: killed at the point, recovered,
// state exact, writable, graceful stop; a case whose point was not reached
// within the workload bound fails, and is listed too), plus two checks of the
// kill points themselves: an unknown point name is refused at start, and
// (the full matrix) every point the server names has a case.
import fs from "node:fs";
import path from "node:path";
import { Checks, NetError, Server, http, parseArgs, tempDir, sleep } from "./lib.mjs";
import {
  ACTORS, BUCKET, FILLER, SERVER_ARGS, WORKLOADS, cloneModel, tok, url, useSeed,
} from "./killpoint_workloads.mjs";

const USAGE = `usage: node tests/faults/killpoints_test.mjs --bin build/runnel [--quick] [--jobs 2]
  [--only POINT] [--ops create,append,...] [--seed N] [--case-ms 8000]
  --quick keeps the smallest and largest N of each (operation, point) pair (for the sanitizer build).`;
const opts = parseArgs(process.argv.slice(2), {
  bin: "build/runnel", quick: false, jobs: 2, only: "", ops: "", seed: 1, caseMs: 8000,
}, USAGE);
useSeed(opts.seed);

const checks = new Checks();
// The recovery template: everything stays in the log (no checkpoint), so a
// restart replays it all through the apply path's kill points.
const RECOVERY_ARGS = ["--wal-segment-bytes", "1048576", "--checkpoint-bytes", String(1 << 30), "--test-hooks"];
const RECOVERY_MIX = [["delete", 0, 1000], ["retention", 1, 30], ["publish", 2, 12], ["append", 0, 60]];
const AHEAD_POINTS = ["ahead-after-write", "ahead-after-sync", "arriving-after-piece"];
// The recovery templates: the mix each runs (workload, actor, steps), and
// the server's arguments; "recovery-large" leaves reference records in the
// log (large creates and appends, a stream deleted and created again with
// large appends, retention over them, a filler of 64 KiB appends).
const RECOVERIES = {
  recovery: { mix: RECOVERY_MIX, args: RECOVERY_ARGS },
  "recovery-large": { mix: [["large", 0, 50], ["large", 1, 50], ["retention", 2, 30]], args: [...RECOVERY_ARGS, "--large-append-bytes", "4096"] },
};
const TIER_POINTS = ["tier-before-put", "tier-after-put", "tier-after-record", "tier-before-punch", "tier-after-punch"];
const SWEEP_POINTS = ["sweep-before-unlink", "sweep-after-unlink", "orphan-before-remove", "orphan-after-remove"];

// ---------------------------------------------------------------- the matrix

const GENERIC = ["wal-after-write", "wal-after-sync", "apply-before-store"];
const ROTATION = ["wal-after-spare-rename", "checkpoint-after-syncfs", "checkpoint-before-rename", "checkpoint-before-drop"];
const OPS = ["create", "append", "close", "delete", "publish", "retention"];
function matrix() {
  const cases = [];
  for (const op of OPS) {
    for (const p of GENERIC) for (const n of [1, 2, 3, 5, 8, 13, 21]) cases.push({ op, point: p, n });
    for (const p of ROTATION) for (const n of [1, 2, 3]) cases.push({ op, point: p, n });
  }
  for (const n of [1, 2, 3, 5, 8, 13]) {
    cases.push({ op: "publish", point: "publish-after-blob", n });
    cases.push({ op: "retention", point: "publish-after-blob", n });
    cases.push({ op: "retention", point: "retain-before-punch", n });
    cases.push({ op: "retention", point: "retain-after-punch", n });
    cases.push({ op: "delete", point: "delete-before-remove", n });
    cases.push({ op: "delete", point: "delete-after-remove", n });
  }
  for (const n of [1, 2, 3, 4]) cases.push({ op: "publish", point: "commit-after-assemble", n });
  // history moving to the cold store: the object written, the move logged,
  // the stream file's blocks given back
  for (const p of TIER_POINTS) for (const n of [1, 2, 4, 7]) cases.push({ op: "tiered", point: p, n });
  // the sweeps: a stale part or orphan object unlinked, an orphan sweep's removal
  for (const p of SWEEP_POINTS) for (const n of [1, 3]) cases.push({ op: "sweep", point: p, n });
  // a second crash during the replay of an unclean stop
  for (const n of [1, 10, 30, 60, 90]) cases.push({ op: "recovery", point: "apply-before-store", n });
  for (const n of [1, 4, 9]) {
    cases.push({ op: "recovery", point: "retain-before-punch", n });
    cases.push({ op: "recovery", point: "retain-after-punch", n });
  }
  for (const n of [1, 10, 25]) {
    cases.push({ op: "recovery", point: "delete-before-remove", n });
    cases.push({ op: "recovery", point: "delete-after-remove", n });
  }
  // large appends written once: the generic and rotation points, the three
  // of the path (a piece of a body written while it arrives; the body
  // written, then synced, before its record), and the
  // replay of a log of reference records killed while restoring them or
  // after removing a deleted stream's files (whose records come before)
  for (const p of GENERIC) for (const n of [1, 3, 8, 21]) cases.push({ op: "large", point: p, n });
  for (const p of ROTATION) for (const n of [1, 2, 3]) cases.push({ op: "large", point: p, n });
  for (const p of AHEAD_POINTS) for (const n of [1, 2, 3, 5, 8]) cases.push({ op: "large", point: p, n });
  for (const n of [1, 20, 60, 100]) cases.push({ op: "recovery-large", point: "apply-before-store", n });
  for (const n of [1, 6]) {
    cases.push({ op: "recovery-large", point: "delete-before-remove", n });
    cases.push({ op: "recovery-large", point: "delete-after-remove", n });
  }
  let out = cases;
  if (opts.only) out = out.filter((c) => c.point === opts.only);
  if (opts.ops) out = out.filter((c) => opts.ops.split(",").includes(c.op));
  if (opts.quick) {
    // every (operation, point) pair keeps its smallest and largest N
    const groups = new Map();
    for (const c of out) {
      const k = `${c.op} ${c.point}`;
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(c);
    }
    out = [...groups.values()].flatMap((g) => (g.length > 1 ? [g[0], g[g.length - 1]] : g));
  }
  return out;
}

// ---------------------------------------------------------------- observing and comparing

async function observe(srv, name) {
  const h = await http(url(srv, name), { method: "HEAD" });
  if (h.status !== 200) return { status: h.status };
  const tail = Number(h.headers.get("stream-next-offset").split("_")[1]);
  const retained = Number((h.headers.get("stream-retained-offset") ?? tok(0)).split("_")[1]);
  const o = { status: 200, tail, retained, closed: h.headers.get("stream-closed") === "true", snap: null };
  const snapOff = h.headers.get("stream-snapshot-offset");
  if (snapOff) {
    const g = await http(`${url(srv, name)}/snapshot/${snapOff}`);
    o.snap = { offset: Number(snapOff.split("_")[1]), status: g.status, body: g.body };
  }
  const parts = [];
  let off = tok(retained);
  for (let i = 0; i < 10000; i++) {
    const r = await http(`${url(srv, name)}?offset=${off}`);
    if (r.status !== 200) { o.readError = `read at ${off} answered ${r.status}`; break; }
    parts.push(r.body);
    off = r.headers.get("stream-next-offset");
    if (r.headers.get("stream-up-to-date") === "true") break;
  }
  o.data = Buffer.concat(parts);
  return o;
}

// Differences between an observed stream and a model state ([] when equal).
function diff(name, o, st) {
  const want = st ?? { status: 404 };
  if (o.status !== want.status) return [`${name}: status ${o.status}, expected ${want.status}`];
  if (o.status !== 200) return [];
  const out = [];
  const content = Buffer.concat(want.content);
  if (o.tail !== content.length) out.push(`${name}: tail ${o.tail}, expected ${content.length}`);
  if (o.closed !== want.closed) out.push(`${name}: closed ${o.closed}, expected ${want.closed}`);
  if (o.retained !== want.retained) out.push(`${name}: retained ${o.retained}, expected ${want.retained}`);
  if (o.readError) out.push(`${name}: ${o.readError}`);
  else if (!o.data.equals(content.subarray(want.retained))) {
    let i = 0;
    const w = content.subarray(want.retained);
    while (i < o.data.length && o.data[i] === w[i]) i++;
    out.push(`${name}: bytes differ from ${want.retained + i} (got ${o.data.length}, expected ${w.length})`);
  }
  if (!want.snap !== !o.snap) out.push(`${name}: snapshot ${o.snap ? `at ${o.snap.offset}` : "absent"}, expected ${want.snap ? `at ${want.snap.offset}` : "none"}`);
  else if (want.snap) {
    if (o.snap.offset !== want.snap.offset) out.push(`${name}: snapshot at ${o.snap.offset}, expected ${want.snap.offset}`);
    else if (o.snap.status !== 200 || !o.snap.body.equals(want.snap.body)) out.push(`${name}: snapshot body differs (read ${o.snap.status}, ${o.snap.body.length} bytes, expected ${want.snap.body.length})`);
  }
  return out;
}

// ---------------------------------------------------------------- templates and cases

const root = tempDir("runnel-kp-", { fast: true, keep: true });
const templates = new Map(); // op -> {dir, models: [Map per actor], filler: Map}

function* take(gen, n) {
  for (const x of gen) {
    if (n-- <= 0) return;
    yield x;
  }
}

// A recovery template (RECOVERIES): its mix of workloads run to completion
// (acknowledged), then SIGKILL, so the next start replays the whole log.
async function buildRecoveryTemplate(op) {
  const { mix, args } = RECOVERIES[op];
  const dir = path.join(root, `template-${op}`);
  fs.mkdirSync(dir);
  const srv = new Server({ bin: opts.bin, dataDir: path.join(dir, "data"), args, logPath: path.join(dir, "server.log") });
  const models = [];
  const filler = new Map();
  try {
    await srv.start();
    for (const [kind, a, steps] of mix) {
      const m = new Map();
      await WORKLOADS[kind].setup(srv, a, m);
      const r = await runClient(srv, m, take(WORKLOADS[kind].ops(a), steps), { stop: false });
      if (r.inDoubt || r.issues.length) throw new Error(`${op} template (${kind}): ${r.issues.join("; ") || "a request failed"}`);
      models.push(m);
    }
    await FILLER.setup(srv, filler);
    const r = await runClient(srv, filler, take(FILLER.ops(), 20), { stop: false });
    if (r.inDoubt || r.issues.length) throw new Error(`${op} template (filler): ${r.issues.join("; ")}`);
  } catch (e) {
    srv.killNow();
    throw e;
  }
  await srv.stop("SIGKILL");
  templates.set(op, { dir, models, filler, args, replay: true });
}

async function buildTemplate(op) {
  if (op in RECOVERIES) return buildRecoveryTemplate(op);
  const dir = path.join(root, `template-${op}`);
  fs.mkdirSync(dir);
  const args = WORKLOADS[op].args ?? SERVER_ARGS;
  const srv = new Server({ bin: opts.bin, dataDir: path.join(dir, "data"), args, logPath: path.join(dir, "server.log") });
  const models = [];
  const filler = new Map();
  try {
    await srv.start();
    for (let a = 0; a < ACTORS; a++) {
      const m = new Map();
      await WORKLOADS[op].setup(srv, a, m);
      models.push(m);
    }
    await FILLER.setup(srv, filler);
  } catch (e) {
    srv.killNow();
    throw e;
  }
  const ex = await srv.stop("SIGTERM");
  if (ex.code !== 0) throw new Error(`template server for ${op} exited ${JSON.stringify(ex)}`);
  templates.set(op, { dir, models, filler, args });
}

// Runs one client: ops in order, one in flight. Returns {inDoubt, issues}.
async function runClient(srv, model, gen, ctx) {
  const issues = [];
  for (const step of gen) {
    if (ctx.stop) return { inDoubt: null, issues };
    let op;
    try {
      op = typeof step === "function" ? await step(srv, model) : step;
    } catch (e) {
      // a preparatory request (a part upload) failed: nothing of the op was sent
      if (e instanceof NetError || /fetch failed|ECONN|socket/.test(String(e.message))) { ctx.stop = true; return { inDoubt: null, issues }; }
      issues.push(String(e.message));
      ctx.stop = true;
      return { inDoubt: null, issues };
    }
    const r = op.req;
    let res;
    try {
      res = await http(`${srv.url}${r.path ?? `/${BUCKET}/${r.name}`}`, { method: r.method, headers: r.headers, body: r.body, timeoutMs: 20000 });
    } catch (e) {
      ctx.stop = true;
      return { inDoubt: op, issues };
    }
    if (!op.ok.includes(res.status)) {
      issues.push(`${r.method} ${r.path ?? r.name} answered ${res.status} ${res.text.slice(0, 160)} (expected ${op.ok.join("/")})`);
      ctx.stop = true;
      return { inDoubt: null, issues };
    }
    op.apply(model);
  }
  return { inDoubt: null, issues };
}

async function runCase(c, idx) {
  const tpl = templates.get(c.op);
  const dir = path.join(root, `case-${idx}`);
  fs.cpSync(tpl.dir, dir, { recursive: true });
  fs.rmSync(path.join(dir, "server.log"), { force: true });
  const logPath = path.join(dir, "server.log");
  const dataDir = path.join(dir, "data");
  const name = `${c.op} ${c.point}:${c.n}`;
  const issues = [];
  const models = tpl.models.map(cloneModel);
  const filler = cloneModel(tpl.filler);
  const args = tpl.args ?? SERVER_ARGS;
  let srv = new Server({ bin: opts.bin, dataDir, args, logPath, env: { RUNNEL_FAULT_KILL_AT: `${c.point}:${c.n}` } });
  let reached = false;
  try {
    try {
      await srv.start();
    } catch (e) {
      if (srv.exitInfo?.signal !== "SIGKILL") throw e;
      reached = true; // killed during start (recovery)
      if (!fs.readFileSync(logPath, "utf8").includes("killed at a kill point")) issues.push("server died by SIGKILL without the kill-point message");
    }
    let results = [];
    if (!reached) {
      const ctx = { stop: false };
      const timer = setTimeout(() => { ctx.stop = true; }, opts.caseMs);
      const clients = tpl.replay ? [] : models.map((m, a) => runClient(srv, m, WORKLOADS[c.op].ops(a), ctx));
      if (!tpl.replay) clients.push(runClient(srv, filler, FILLER.ops(...(WORKLOADS[c.op].filler ?? [])), ctx));
      results = await Promise.all(clients);
      clearTimeout(timer);
      for (const r of results) issues.push(...r.issues);
      // a request without an answer means the server is dying: give it time
      const dying = results.some((r) => r.inDoubt);
      const ex = await Promise.race([srv.exited, sleep(dying ? 10000 : 300).then(() => null)]);
      if (ex === null) {
        // the point was not reached: a failure (a point removed from the
        // code, or a workload that no longer passes it, proves nothing);
        // stop and still verify (nothing in doubt)
        issues.push(`the kill point was not reached: the server passed ${c.point} fewer than ${c.n} times in ${opts.caseMs} ms of workload`);
        const stopEx = await srv.stop("SIGTERM");
        if (results.some((r) => r.inDoubt)) issues.push(`a request failed without the server dying (${JSON.stringify(stopEx)})`);
      } else if (ex.signal !== "SIGKILL") {
        issues.push(`server exited ${JSON.stringify(ex)}, expected SIGKILL at the kill point`);
      } else {
        reached = true;
        if (!fs.readFileSync(logPath, "utf8").includes("killed at a kill point")) issues.push("server died by SIGKILL without the kill-point message");
      }
    }
    // restart without the kill point and verify every client's streams
    srv = new Server({ bin: opts.bin, dataDir, args, logPath, port: srv.port });
    await srv.start();
    // no write has run since the start, so no checkpoint is being written
    if (fs.existsSync(path.join(dataDir, "checkpoint.tmp"))) issues.push("recovery left a half-written checkpoint.tmp behind");
    const all = [...models.map((m, a) => ({ m, inDoubt: results[a]?.inDoubt })), { m: filler, inDoubt: results[models.length]?.inDoubt }];
    let applied = 0;
    for (const { m, inDoubt } of all) {
      const names = new Set(m.keys());
      let after = null;
      if (inDoubt) {
        after = cloneModel(m);
        inDoubt.apply(after);
        for (const k of after.keys()) names.add(k);
      }
      const observed = new Map();
      for (const n of names) observed.set(n, await observe(srv, n));
      const before = [...names].flatMap((n) => diff(n, observed.get(n), m.get(n)));
      if (before.length === 0) continue;
      const withOp = after ? [...names].flatMap((n) => diff(n, observed.get(n), after.get(n))) : null;
      if (withOp && withOp.length === 0) { applied++; continue; }
      issues.push(...before.map((d) => `${d}${inDoubt ? ` (nor with the in-flight ${inDoubt.req.method} ${inDoubt.req.path ?? inDoubt.req.name}: ${withOp[0]})` : ""}`));
    }
    if (WORKLOADS[c.op]?.settled) issues.push(...await WORKLOADS[c.op].settled(srv));
    // writable again, and a graceful stop
    const w = await http(url(srv, "filler"), { method: "POST", headers: { "content-type": "application/octet-stream" }, body: "after" });
    if (w.status !== 204) issues.push(`append after recovery answered ${w.status} ${w.text.slice(0, 200)}`);
    const ex = await srv.stop("SIGTERM");
    if (ex.code !== 0) issues.push(`graceful stop after recovery exited ${JSON.stringify(ex)}`);
    const inDoubtCount = results.filter((r) => r?.inDoubt).length;
    return { name, reached, issues, inDoubt: inDoubtCount, applied };
  } catch (e) {
    issues.push(`error: ${e.message.slice(0, 1500)}`);
    srv.killNow();
    return { name, reached, issues, inDoubt: 0, applied: 0 };
  } finally {
    if (issues.length === 0) fs.rmSync(dir, { recursive: true, force: true });
    else issues.push(`(kept ${dir})`);
  }
}

// The server refuses a kill point it does not have (a misspelt or removed
// point would never fire), naming the ones it has; the full matrix has a
// case for each of those.
async function checkPointNames(cases) {
  const dir = tempDir("runnel-kp-names-");
  const srv = new Server({ bin: opts.bin, dataDir: dir, args: SERVER_ARGS, env: { RUNNEL_FAULT_KILL_AT: "no-such-point:1" } });
  let started = null;
  try {
    await srv.start({ readyMs: 5000 });
    started = "it started";
  } catch { /* refused, as it must */ }
  srv.killNow();
  const ex = await srv.exited;
  const m = srv.log.match(/names no kill point of this build: no-such-point \(known: ([^)]*)\)/);
  checks.check("an unknown kill point is refused at start (exit 1, naming the known points)",
    !started && ex.code === 1 && m !== null, `${started ?? `exit ${JSON.stringify(ex)}`}: ${srv.logTail(3)}`);
  if (m && !opts.only && !opts.ops && !opts.quick) {
    const tested = new Set(cases.map((c) => c.point));
    const missing = m[1].split(" ").filter((p) => !tested.has(p));
    checks.check("every kill point of the server has a case", missing.length === 0, `no case for ${missing.join(", ")}`);
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

async function main() {
  const t0 = Date.now();
  const cases = matrix();
  console.log(`# kill-point test: ${cases.length} cases, ${opts.jobs} at a time, data under ${root}`);
  await checkPointNames(cases);
  for (const op of new Set(cases.map((c) => c.op))) await buildTemplate(op);
  let next = 0;
  const notReached = [];
  let hit = 0, inDoubt = 0, applied = 0;
  const perPoint = new Map();
  async function worker() {
    while (next < cases.length) {
      const i = next++;
      const c = cases[i];
      const t = Date.now();
      const r = await runCase(c, i);
      if (r.reached) hit++;
      else notReached.push(r.name);
      inDoubt += r.inDoubt;
      applied += r.applied;
      if (r.reached) perPoint.set(c.point, (perPoint.get(c.point) ?? 0) + 1);
      checks.check(`${r.name}`, r.issues);
      if (process.env.KP_VERBOSE) console.log(`# ${r.name}: ${r.reached ? "killed" : "not reached"}, ${Date.now() - t} ms`);
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, opts.jobs) }, worker));
  console.log(`# kill points hit: ${hit} of ${cases.length} cases (${[...perPoint].map(([p, n]) => `${p}=${n}`).join(" ")})`);
  if (notReached.length) console.log(`# not reached within the workload bound: ${notReached.join(", ")}`);
  console.log(`# requests in flight at the kill: ${inDoubt}; found applied after recovery: ${applied}`);
  console.log(`# runtime ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  if (checks.failed === 0) fs.rmSync(root, { recursive: true, force: true });
  process.exit(checks.summary());
}

main().catch((e) => {
  console.log(`FAIL internal error: ${e.stack}`);
  checks.failed++;
  process.exit(checks.summary());
});
