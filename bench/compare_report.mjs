// Renders BENCHMARKS.md (to stdout) from the raw results directory that
// bench/compare fills: per-run JSON reports of runnel-bench, per-thread
// server CPU snapshots, the machine's load and CPU counters around every run,
// Runnel's /__runnel/metrics at the end of each run, micro-benchmark JSON,
// perf/strace summaries, and the capacity results of bench/capacity.sh
// (DIR/capacity). bench/previous-run.json gives the previous run's figures
// for the comparison table, bench/limits.md (if present) the hand-written
// reading of what limits missed targets, bench/client.md (if present) the
// client section bench/client.sh recorded. Every other number printed comes
// from those files; a figure with no data says so.
// Usage: node bench/compare_report.mjs RESULTS_DIR > BENCHMARKS.md
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { CLK_TCK, cell, condCell, fmt, median, mstat, runEnv as runEnvIn, verdict } from "./report_util.mjs";

const dir = process.argv[2];
const files = readdirSync(dir);
const has = (f) => existsSync(join(dir, f));
const read = (f) => readFileSync(join(dir, f), "utf8");
const json = (f) => {
  try {
    return JSON.parse(read(f));
  } catch {
    return null;
  }
};
const SERVERS = ["runnel", "reference"];

// ---- raw data -----------------------------------------------------------------

// Per-thread CPU seconds between two thread_cpu snapshots: `loop` is the
// main thread (the lowest thread id, equal to the PID), `workers` all others
// (libuv's pool: the log's batch write + fdatasync, checkpoints).
function threadCpu(a0, a1) {
  const snap = (f) => {
    const out = new Map();
    if (!has(f)) return out;
    for (const line of read(f).split("\n")) {
      const [tid, comm, u, s] = line.split("\t");
      if (tid) out.set(tid, { comm, ticks: Number(u) + Number(s) });
    }
    return out;
  };
  const a = snap(a0), b = snap(a1);
  const main = Math.min(...[...b.keys()].map(Number));
  const out = { loop: 0, workers: 0 };
  for (const [tid, t] of b) {
    const secs = (t.ticks - (a.get(tid)?.ticks ?? 0)) / CLK_TCK;
    out[Number(tid) === main ? "loop" : "workers"] += secs;
  }
  return out;
}

const runEnv = (tag) => runEnvIn(dir, tag);

// Prometheus text → { name: value } for plain samples, buckets kept apart.
function parseMetrics(f) {
  if (!has(f)) return null;
  const m = { buckets: [] };
  for (const line of read(f).split("\n")) {
    if (line.startsWith("#") || !line.trim()) continue;
    const b = line.match(/^runnel_wal_sync_seconds_bucket\{le="([^"]+)"\} (\d+)/);
    if (b) {
      m.buckets.push([b[1] === "+Inf" ? Infinity : Number(b[1]), Number(b[2])]);
      continue;
    }
    const p = line.match(/^([a-z_]+) ([0-9.e+-]+)$/);
    if (p) m[p[1]] = Number(p[2]);
  }
  return m;
}
// Counter deltas b - a (a may be null: from zero).
function metricsDelta(a, b) {
  if (!b) return null;
  const d = { buckets: b.buckets.map(([le, n], i) => [le, n - (a?.buckets[i]?.[1] ?? 0)]) };
  for (const k of Object.keys(b)) if (k !== "buckets") d[k] = b[k] - (a?.[k] ?? 0);
  return d;
}
// Upper bound (ms) of the bucket holding quantile q of the sync histogram.
function syncQuantileMs(d, q) {
  const total = d.buckets.at(-1)?.[1] ?? 0;
  if (!total) return NaN;
  for (const [le, n] of d.buckets) if (n >= q * total) return le * 1000;
  return Infinity;
}
function walFigures(d, wallS) {
  if (!d) return null;
  const batches = d.runnel_wal_batches_total;
  return {
    appends: d.runnel_appends_total,
    appends_per_s: d.runnel_appends_total / wallS,
    syncs: batches,
    syncs_per_s: batches / wallS,
    records_per_batch: d.runnel_wal_records_total / batches,
    sync_mean_ms: (1000 * d.runnel_wal_sync_seconds_sum) / d.runnel_wal_sync_seconds_count,
    sync_p50_ms: syncQuantileMs(d, 0.5),
    sync_p99_ms: syncQuantileMs(d, 0.99),
    sse_events: d.runnel_sse_events_total,
  };
}

// runs[scenario][server] = [report, ...] (one per round; failed runs kept for errors)
const runs = {};
for (const f of files) {
  const m = f.match(/^([a-z0-9]+)-(runnel|reference)-(\d+)\.json$/);
  if (!m) continue;
  const r = json(f);
  if (!r) continue;
  const tag = f.replace(/\.json$/, "");
  r._round = Number(m[3]);
  r._cpu = threadCpu(tag + ".cpu0", tag + ".cpu1");
  r._env = runEnv(tag);
  r._wal = walFigures(metricsDelta(null, parseMetrics(tag + ".metrics")), r._env?.bench_wall_s ?? NaN);
  ((runs[m[1]] ??= {})[m[2]] ??= []).push(r);
}
for (const byServer of Object.values(runs))
  for (const rs of Object.values(byServer)) rs.sort((a, b) => a._round - b._round);

const ms = (h, k) => (h ? h[k] / 1000 : NaN);
const cpuTotal = (r) => r._cpu.loop + r._cpu.workers;
// [scenario, label, getter]
const FIGURES = [
  ["writes500", "writes, 500 streams × 256 B: appends/s", (r) => r.appends_per_s],
  ["writes500", "writes, 500 streams: append latency p50 (ms)", (r) => ms(r.append_latency, "p50_us")],
  ["writes500", "writes, 500 streams: append latency p99 (ms)", (r) => ms(r.append_latency, "p99_us")],
  ["writes500", "writes, 500 streams: append latency max (ms)", (r) => ms(r.append_latency, "max_us")],
  ["writes500", "writes, 500 streams: server CPU (s per run)", cpuTotal],
  ["writes100", "writes, 100 streams × 256 B: appends/s", (r) => r.appends_per_s],
  ["writes100", "writes, 100 streams: append latency p50 (ms)", (r) => ms(r.append_latency, "p50_us")],
  ["writes100", "writes, 100 streams: append latency p99 (ms)", (r) => ms(r.append_latency, "p99_us")],
  ["fanout1000", "fanout, 1,000 SSE subscribers @ 50 ev/s: delivery p50 (ms)", (r) => ms(r.delivery_latency, "p50_us")],
  ["fanout1000", "fanout: delivery p99 (ms)", (r) => ms(r.delivery_latency, "p99_us")],
  ["fanout1000", "fanout: delivery max (ms)", (r) => ms(r.delivery_latency, "max_us")],
  ["fanout1000", "fanout: delivered / expected (%)", (r) => (100 * r.delivered) / r.expected],
  ["fanout1000", "fanout: server CPU (s per run)", cpuTotal],
  ["catchup1g", "catch-up of 1 GiB, 1 client (MB/s)", (r) => r.one_mb_per_s],
  ["catchup1g", "catch-up of 1 GiB, 2 concurrent clients (MB/s total)", (r) => r.many_mb_per_s],
  ["catchup1g", "pre-fill of 1 GiB in 4 MiB appends (MB/s)", (r) => r.fill_mb_per_s],
  ["longpoll10k", "long-poll, 10,000 parked readers: server RSS parked (MiB)", (r) => r.server_rss_parked_kib / 1024],
  ["longpoll10k", "long-poll: server RSS peak (MiB)", (r) => r.server_rss_peak_kib / 1024],
  ["longpoll10k", "long-poll: append-to-wake p50 (ms)", (r) => ms(r.wake_latency, "p50_us")],
  ["longpoll10k", "long-poll: append-to-wake p99 (ms)", (r) => ms(r.wake_latency, "p99_us")],
  ["longpoll10k", "long-poll: delivered / expected (%)", (r) => (100 * r.delivered) / r.expected],
  ["bootstrap100", "replay, 100 clients × 256 KB at once: completion p50 (ms)", (r) => ms(r.completion_latency, "p50_us")],
  ["bootstrap100", "replay, 100 clients × 256 KB at once: completion p99 (ms)", (r) => ms(r.completion_latency, "p99_us")],
  ["bootstrap100", "replay, 100 clients: aggregate MB/s", (r) => r.replay_mb_per_s],
  ["bootstrap1000", "bootstrap, 1,000 clients at once: completion p50 (ms)", (r) => ms(r.completion_latency, "p50_us")],
  ["bootstrap1000", "bootstrap, 1,000 clients: completion p99 (ms)", (r) => ms(r.completion_latency, "p99_us")],
  ["bootstrap1000", "bootstrap, 1,000 clients: completion max (ms)", (r) => ms(r.completion_latency, "max_us")],
  ["bootstrap1000", "bootstrap, 1,000 clients: per-request latency p50 (ms; Runnel's one GET /bootstrap)", (r) => ms(r.request_latency, "p50_us")],
  ["bootstrap1000", "bootstrap, 1,000 clients: per-request latency p99 (ms)", (r) => ms(r.request_latency, "p99_us")],
  ["bootstrap1000", "bootstrap, 1,000 clients: body bytes per client (KB)", (r) => (r.bootstrap_bytes ?? r.replay_bytes) / r.clients / 1000],
  ["bootstrap1000", "bootstrap, 1,000 clients: aggregate MB/s", (r) => r.bootstrap_mb_per_s ?? r.replay_mb_per_s],
  ["bootstrap1000", "bootstrap, 1,000 clients: server CPU (s per run, incl. pre-fill)", cpuTotal],
];

// A run counts when it reported no error (older reports of scenarios with a
// writer could end without error after acknowledging no append: not valid).
const valid = (r) => r.errors === 0 && (r.appends ?? 1) > 0;
function stats(sc, server, get) {
  const rs = (runs[sc]?.[server] ?? []).filter(valid);
  return mstat(rs.map(get));
}
const NOW = new Map(); // label → this run's median, for the previous-run table

const L = [];
const machine = read("machine.txt").trim().split("\n");
const get = (k) => machine.find((l) => l.startsWith(k + ":"))?.slice(k.length + 2) ?? "?";
L.push("# Benchmarks", "");
L.push(
  "Measured by `bench/compare` (see docs/BENCHMARKING.md): every scenario of `runnel-bench` against Runnel",
  "and against the Node reference server, alternating (A B A B), each run on a freshly started server with",
  "an empty data directory, then the capacity measurements of `bench/capacity.sh`. Both servers acknowledge",
  "appends only after `fdatasync`. The load generator runs on the same machine; nothing is pinned (`taskset`",
  "not used): server and load generator share both cores. Figures are medians over the rounds with the",
  "range (min–max) in brackets. The machine is shared with other engineers' test runs: before every run the",
  "script waited for a 1-minute load average below 1.0 (bounded); \"Run conditions\" lists what each run found.",
  ""
);
L.push("## Machine", "");
for (const k of ["date", "runnel", "runnel-src-changes", "reference", "node", "nproc", "cpu", "memory", "kernel", "disk", "rounds", "quiet"])
  L.push(`- ${k}: ${get(k)}`);
for (const l of machine.filter((l) => l.startsWith("rerun:"))) L.push(`- ${l}`);
L.push("", "## Commands", "", "```sh", "bench/compare            # this whole page (bench/capacity.sh included)");
const cmds = read("commands.txt").trim().split("\n").map((l) => l.split("|"));
for (const [name, server, cmd] of cmds) {
  const other = cmds.find(([n, s]) => n === name && s !== server);
  if (server === "runnel") L.push(`${cmd}   # ${name}${other && other[2] === cmd ? "" : " (Runnel)"}`);
  else if (!cmds.some(([n, s, c]) => n === name && s === "runnel" && c === cmd)) L.push(`${cmd}   # ${name} (reference)`);
}
L.push(
  "runnel-micro-json --seconds 2 --json",
  "runnel-micro-blake3 --seconds 1 --json",
  "runnel-micro-wal --dir /var/tmp/… --concurrency {1,64,512} --record-bytes 256 --seconds 3 --json",
  "runnel-micro-wal --dir /dev/shm --concurrency 64 --record-bytes 256 --seconds 3 --json",
  "bench/capacity.sh        # idle streams, restart times (commands in its header)",
  "```",
  "",
  "Runnel is started as `runnel serve --max-connections 12000 --max-live-reads 12000 --long-poll-timeout-ms 30000` (other settings",
  "default; `bench/capacity.sh` uses all defaults); the reference as `node bench/reference/start.mjs PORT",
  "DATA_DIR 30000 1024`: file-backed store with its pool of open stream files raised from the package's 100",
  "to 1,024 (with 100, appends to more than 100 streams at once get 404 when a handle is evicted between",
  "write and fsync; see the comment in start.mjs).",
  ""
);

L.push("## Results", "", "| figure | Runnel | reference | Runnel / reference |", "|---|---|---|---|");
for (const [sc, label, g] of FIGURES) {
  const a = stats(sc, "runnel", g), b = stats(sc, "reference", g);
  NOW.set(label, a.med);
  const ratio = a.n && b.n && b.med ? `${fmt(a.med / b.med)}×` : "n/a";
  L.push(`| ${label} | ${cell(a)} | ${cell(b)} | ${ratio} |`);
}
L.push(
  "",
  "![Appends: Runnel against the reference](docs/bench/writes.svg)",
  "",
  "![Reads: Runnel against the reference](docs/bench/reads.svg)",
  "",
  "(`node bench/plots.mjs headline` draws both from this table; `bench/compare` runs it after writing this page.)",
  "",
  "The bootstrap rows compare what a client does to initialise: on Runnel one `GET {stream}/bootstrap`",
  "(bucket surface) whose answer is the 64 KiB snapshot published at the tail of 200 × 1 KiB events",
  "(multipart/mixed, checked part by part; Stream-Next-Offset must equal the tail); on the reference, which",
  "has no snapshots, a replay of the 200 KiB from offset -1. Completion is measured from the moment all",
  "1,000 clients are released (on already-open connections) to each client's complete state; the per-request",
  "latency of Runnel's GET /bootstrap starts when that client's request is issued (issuing 1,000 requests",
  "takes the load generator a few ms). The target is judged on completion.",
  ""
);

// Runs that failed (protocol errors, timeouts).
const failures = [];
for (const [sc, byServer] of Object.entries(runs))
  for (const [server, rs] of Object.entries(byServer))
    for (const r of rs)
      if (r.errors) failures.push(`- ${sc} on ${server}, round ${r._round}: ${r.errors} error(s): ${r.error_messages.slice(0, 3).join("; ")}`);
      else if (!valid(r)) failures.push(`- ${sc} on ${server}, round ${r._round}: no append was acknowledged during the writing phase`);
const missingRuns = [];
for (const sc of new Set(FIGURES.map((f) => f[0])))
  for (const server of SERVERS) if (!runs[sc]?.[server]?.length) missingRuns.push(`- ${sc} on ${server}: no report`);
if (failures.length || missingRuns.length)
  L.push("Runs excluded from the figures (they reported errors or produced no report):", "", ...failures, ...missingRuns, "");

// Run conditions.
L.push("### Run conditions", "",
  "Per run: seconds waited for quiet (✓ reached load < 1.0, ✗ gave up), 1-minute load average at the start →",
  "end, and CPU-seconds used by *other* processes during the run: the machine's user+system+irq time from",
  "/proc/stat minus the server's and the load generator's own CPU time. Approximate: the two are accounted",
  "differently, so values within about ±1 s of zero mean nothing else ran (the harness's own curl/node is ~0.1 s).", "",
  "| scenario | server | round 1 | round 2 | round 3 |", "|---|---|---|---|---|");
let notQuiet = 0, nRuns = 0;
const otherCpu = (r) => (r._env ? r._env.busy_s - cpuTotal(r) - (r._env.bench_cpu_s ?? 0) : NaN);
for (const sc of Object.keys(runs))
  for (const server of SERVERS) {
    const rs = runs[sc][server] ?? [];
    const cells = [1, 2, 3].map((k) => {
      const r = rs.find((x) => x._round === k);
      if (!r || !r._env) return "n/a";
      nRuns++;
      if (!r._env.quiet) notQuiet++;
      return condCell({ ...r._env, other_s: otherCpu(r) });
    });
    L.push(`| ${sc} | ${server} | ${cells.join(" | ")} |`);
  }
for (const f of files.filter((f) => /^micro-\d+\.env$/.test(f)).sort()) {
  const e = runEnv(f.replace(/\.env$/, ""));
  L.push(`| micro-benchmarks | runnel | round ${f.match(/\d+/)[0]}: ${condCell({ ...e, other_s: e.busy_s - (e.bench_cpu_s ?? 0) })} (other includes the micro-benchmark itself) | | |`);
}
L.push("", `${nRuns - notQuiet} of ${nRuns} scenario runs started on a quiet machine (load < 1.0).`, "");

// Server CPU by thread and the log.
L.push("### Runnel: CPU by thread and the log (median per run)", "",
  "| scenario | loop thread CPU s | worker threads CPU s | run wall s | appends | fdatasyncs (log batches) /s | appends per batch | sync mean ms | sync p99 ms (bucket bound) |",
  "|---|---|---|---|---|---|---|---|---|");
for (const sc of Object.keys(runs).sort()) {
  const rs = (runs[sc].runnel ?? []).filter(valid);
  if (!rs.length) continue;
  const w = (k) => fmt(median(rs.map((r) => r._wal?.[k])));
  L.push(`| ${sc} | ${fmt(median(rs.map((r) => r._cpu.loop)))} | ${fmt(median(rs.map((r) => r._cpu.workers)))} | ${fmt(median(rs.map((r) => r._env?.bench_wall_s)))} | ${w("appends")} | ${w("syncs_per_s")} | ${w("records_per_batch")} | ${w("sync_mean_ms")} | ${w("sync_p99_ms")} |`);
}
L.push("", "CPU covers the whole run including setup (stream creation, pre-fill), from /proc/PID/task/*/stat; the log",
  "figures come from Runnel's /__runnel/metrics at the end of the run (a sync is the batch's pwritev + fdatasync,",
  "timed on the worker thread), per second of the load generator's wall time.", "");

// Micro-benchmarks.
L.push("## Micro-benchmarks (Runnel only)", "", "| figure | median (range) |", "|---|---|");
const micro = (prefix) => files.filter((f) => f.startsWith(prefix) && f.endsWith(".json")).map(json).filter(Boolean);
const microRow = (label, v) => {
  const s = mstat(v);
  NOW.set(label, s.med);
  L.push(`| ${label} | ${cell(s)} |`);
};
const mj = micro("micro-json-");
const JSON_INPUTS = { small: "1 KiB bodies of ten ~100 B objects", objects: "1 MiB array of typical objects", strings: "1 MiB array of 64 KiB strings" };
for (const [k, label] of Object.entries(JSON_INPUTS)) microRow(`rn_json_to_messages, ${label} (MB/s)`, mj.map((r) => r[k]?.mb_per_s));
const mb = micro("micro-blake3-");
const B3_INPUTS = { "1m": "1 MiB in one update", "64k": "64 KiB in one update", "1m_in_4k": "1 MiB in 4 KiB updates" };
for (const path of ["auto", "avx2", "sse41", "portable"]) {
  const impl = mb.find((r) => r[path])?.[path]?.impl;
  if (!mb.some((r) => r[path])) {
    L.push(`| BLAKE3 ${path} path | not supported on this CPU |`);
    continue;
  }
  for (const [k, label] of Object.entries(B3_INPUTS))
    microRow(`BLAKE3 ${path}${path === "auto" ? ` (= ${impl})` : ""} path, ${label} (MB/s)`, mb.map((r) => r[path]?.[`${k}_mb_per_s`]));
}
for (const k of [1, 64, 512])
  microRow(`WAL appends, 256 B records, ${k} in flight, root disk with fdatasync (records/s)`, micro(`micro-wal-disk-k${k}-`).map((r) => r.records_per_s));
microRow("WAL appends, 256 B records, 64 in flight, tmpfs /dev/shm — same code, fdatasync nearly free, **not** a no-sync mode (records/s)", micro("micro-wal-shm-k64-").map((r) => r.records_per_s));
L.push("");

// Capacity.
const cap = (f) => (existsSync(join(dir, "capacity", f)) ? JSON.parse(readFileSync(join(dir, "capacity", f), "utf8")) : null);
const capEnv = (name) => {
  const tag = join("capacity", name);
  return runEnv(tag);
};
const idle = cap("idle.json"), idleCreate = cap("idle-create.json");
const shapes = ["1x1g", "1000x1m"].map((n) => ({ n, r: cap(`restart-${n}.json`), fill: cap(`restart-${n}-fill.json`), env: capEnv(`restart-${n}`) })).filter((x) => x.r);
if (idle || shapes.length) {
  L.push("## Capacity (bench/capacity.sh, Runnel with default settings)", "");
  if (idle) {
    const e = capEnv("idle");
    L.push(`### ${idle.streams.toLocaleString("en-US")} idle streams`, "",
      `Created with PUT on the bucket surface over 256 connections (${fmt(idleCreate?.creates_per_s)} creates/s, p99 ${fmt(ms(idleCreate?.create_latency, "p99_us"))} ms; ${idle.streams_gauge?.toLocaleString("en-US")} streams reported by runnel_streams). ` +
      `Load ${fmt(e?.load_start)} → ${fmt(e?.load_end)}${e && !e.quiet ? " (the machine never got quiet before this step)" : ""}.`, "",
      "| figure | value |", "|---|---|",
      `| server RSS before any stream (MiB) | ${fmt(idle.rss_empty_kib / 1024)} |`,
      `| server RSS with all streams, 5 s after the last create: VmRSS (MiB) | ${fmt(idle.rss_kib / 1024)} |`,
      `| … VmHWM (peak) / RssAnon (MiB) | ${fmt(idle.hwm_kib / 1024)} / ${fmt(idle.rss_anon_kib / 1024)} |`,
      `| … per stream (bytes, (VmRSS − empty) / streams) | ${fmt(((idle.rss_kib - idle.rss_empty_kib) * 1024) / idle.streams)} |`,
      `| restart after SIGKILL: ready after (ms) | ${fmt(idle.sigkill_ready_ms)} — ${idle.sigkill_recovery}${Number.isFinite(idle.sigkill_read_kib) ? `; read ${fmt(idle.sigkill_read_kib / 1024)} MiB from storage` : ""} |`,
      `| … RSS after that restart (MiB) | ${fmt(idle.sigkill_rss_kib / 1024)} |`,
      `| files in the data directory after the creates / after the SIGKILL recovery | ${fmt(idle.files_after_create)} / ${fmt(idle.files_after_sigkill_recovery)} |`,
      `| graceful stop (SIGTERM → exit, final checkpoint) (ms) | ${fmt(idle.shutdown_ms)} |`,
      `| restart after SIGTERM: ready after (ms) | ${fmt(idle.sigterm_ready_ms)} — ${idle.sigterm_recovery} |`,
      `| … RSS after that restart (MiB) | ${fmt(idle.sigterm_rss_kib / 1024)} |`,
      `| data directory size (MiB) | ${fmt(idle.data_dir_kib / 1024)} |`, "");
  }
  if (shapes.length) {
    L.push("### Restart with 1 GiB stored", "",
      "Time from process start (just before exec) to the first 200 of `/__runnel/readyz` (polled every 10 ms).",
      "After SIGKILL: the first recovery after the crash (each SIGKILL figure has its own fill; a second recovery",
      "would find the stream files already cut to the recovered tail). Warm: the data directory's pages in the",
      "page cache; cold: every file of the data directory fsync'ed and evicted with POSIX_FADV_DONTNEED first (only",
      "our files; the VM's disk cache below is not ours to drop). \"read\": what the server read from storage until",
      "ready (/proc/PID/io read_bytes).", "",
      "| shape | stored | fill MB/s | SIGKILL warm | SIGKILL cold (read) | graceful stop | SIGTERM warm | SIGTERM cold (read) | bytes intact after restarts | load start → end |",
      "|---|---|---|---|---|---|---|---|---|---|");
    const mib = (kib) => (Number.isFinite(kib) ? `${fmt(kib / 1024)} MiB` : "n/a");
    for (const { n, r, fill, env } of shapes) {
      const intact = r.stored_bytes_after_restarts === r.bytes && (r.stored_bytes_after_cold_sigkill ?? r.bytes) === r.bytes;
      L.push(`| ${n === "1x1g" ? "1 stream, 4 MiB appends" : "1,000 streams × 1 MiB, 16 KiB appends"} | ${fmt(r.stored_bytes / 2 ** 20)} MiB | ${fmt(fill?.fill_mb_per_s)} | ${fmt(r.sigkill_warm_ready_ms)} ms | ${fmt(r.sigkill_cold_ready_ms)} ms (${mib(r.sigkill_cold_read_kib)}) | ${fmt(r.shutdown_ms)} ms | ${fmt(r.sigterm_warm_ready_ms)} ms | ${fmt(r.sigterm_cold_ready_ms)} ms (${mib(r.sigterm_cold_read_kib)}) | ${intact ? "yes" : `**no** (${r.stored_bytes_after_restarts}, ${r.stored_bytes_after_cold_sigkill})`} | ${fmt(env?.load_start)} → ${fmt(env?.load_end)} |`);
    }
    L.push("", "Recovery as the server logged it:", "");
    for (const { n, r } of shapes)
      for (const k of ["sigkill_warm", "sigkill_cold", "sigterm_warm", "sigterm_cold"]) L.push(`- ${n}, ${k.replace("_", " ")}: ${r[k + "_recovery"]}`);
    L.push("");
  }
  const straces = existsSync(join(dir, "capacity")) ? readdirSync(join(dir, "capacity")).filter((f) => f.endsWith(".strace.txt")).sort() : [];
  if (straces.length) {
    L.push("Recoveries after SIGKILL under `strace -f -T` (extra, untimed first recoveries of their own fill, page cache warm; blocking waits left out):", "");
    for (const f of straces)
      L.push(`${f.replace(".strace.txt", "")}:`, "", "```", readFileSync(join(dir, "capacity", f), "utf8").trimEnd(), "```", "");
  }
}

// Targets of issue 7.
const S = (sc, server, g) => stats(sc, server, g).med;
const fig = (sc, label) => FIGURES.find((f) => f[0] === sc && f[1].includes(label))[2];
const jsonMin = Math.min(NOW.get("rn_json_to_messages, 1 MiB array of typical objects (MB/s)"), NOW.get("rn_json_to_messages, 1 MiB array of 64 KiB strings (MB/s)"));
const b3auto = [...NOW.entries()].find(([k]) => k.startsWith("BLAKE3 auto") && k.includes("1 MiB in one update"))?.[1];
const worst = (k) => (shapes.length ? Math.max(...shapes.map((s) => s.r[k] ?? NaN)) : NaN);
const TARGETS = [
  ["writes, 500 streams × 256 B: ≥ 40,000 appends/s", S("writes500", "runnel", fig("writes500", "appends/s")), ">=", 40000, "appends/s"],
  ["writes, 500 streams: p99 ≤ 25 ms", S("writes500", "runnel", fig("writes500", "p99")), "<=", 25, "ms"],
  ["writes, 500 streams: ≥ 10× the reference", S("writes500", "runnel", fig("writes500", "appends/s")) / S("writes500", "reference", fig("writes500", "appends/s")), ">=", 10, "×"],
  ["writes, 100 streams: p99 ≤ 5 ms", S("writes100", "runnel", fig("writes100", "p99")), "<=", 5, "ms"],
  ["fanout, 1,000 subscribers @ 50 events/s: p99 ≤ 5 ms", S("fanout1000", "runnel", fig("fanout1000", "p99")), "<=", 5, "ms"],
  ["catch-up of 1 GiB, one client: ≥ 1 GB/s", S("catchup1g", "runnel", fig("catchup1g", "1 client")), ">=", 1000, "MB/s"],
  ["JSON validation ≥ 1 GB/s on 1 MiB inputs (slower of objects/strings)", jsonMin, ">=", 1000, "MB/s"],
  ["10,000 parked long-polls ≤ 100 MiB server RSS", S("longpoll10k", "runnel", fig("longpoll10k", "RSS parked")), "<=", 100, "MiB"],
  ["bootstrap, 1,000 clients, 200 × 1 KiB events + 64 KiB snapshot: p99 ≤ 150 ms", S("bootstrap1000", "runnel", fig("bootstrap1000", "p99")), "<=", 150, "ms"],
  ["BLAKE3 ≥ 1 GB/s on 1 MiB (the server's automatic path)", b3auto, ">=", 1000, "MB/s"],
  ["1,000,000 idle streams ≤ 1 GiB RSS", idle && idle.streams >= 1e6 ? idle.rss_kib / 1024 : NaN, "<=", 1024, "MiB"],
  ["restart with 1 GiB stored, after SIGTERM: ready ≤ 2 s (worse shape, warm cache)", worst("sigterm_warm_ready_ms") / 1000, "<=", 2, "s"],
  ["… after SIGTERM, cold cache", worst("sigterm_cold_ready_ms") / 1000, "<=", 2, "s"],
  ["… after SIGKILL: ready ≤ 2 s (worse shape, warm cache)", worst("sigkill_warm_ready_ms") / 1000, "<=", 2, "s"],
  ["… after SIGKILL, cold cache", worst("sigkill_cold_ready_ms") / 1000, "<=", 2, "s"],
];
L.push("## Targets (issue 7: 2 cores, load generator on the same machine, appends acknowledged after fsync)", "");
L.push("| target | measured (median) | verdict |", "|---|---|---|");
for (const [label, v, op, goal, unit] of TARGETS) L.push(`| ${label} | ${fmt(v)} ${unit} | ${verdict(v, op, goal)} |`);
L.push("");

// What limits the targets a run missed: written by hand from the profiles
// of the run it names (bench/limits.md), shown under the verdicts.
const limitsFile = join(dirname(fileURLToPath(import.meta.url)), "limits.md");
if (existsSync(limitsFile)) L.push(readFileSync(limitsFile, "utf8").trimEnd(), "");

// Sections measured apart and kept as recorded: the cluster's, by hand
// (bench/cluster.md), and the client's targets, whose bench/client.sh
// --record writes bench/client.md.
for (const name of ["cluster.md", "client.md"]) {
  const file = join(dirname(fileURLToPath(import.meta.url)), name);
  if (existsSync(file)) L.push(readFileSync(file, "utf8").trimEnd(), "");
}

// Previous run.
const prevFile = join(dirname(fileURLToPath(import.meta.url)), "previous-run.json");
if (existsSync(prevFile)) {
  const prev = JSON.parse(readFileSync(prevFile, "utf8"));
  L.push("## Previous run", "", `Previous: ${prev.run}.`, "", "| figure | previous | this run | change |", "|---|---|---|---|");
  for (const [label, p] of Object.entries(prev.figures)) {
    const now = NOW.get(label);
    L.push(`| ${label} | ${fmt(p)} | ${fmt(now)} | ${Number.isFinite(now) ? `${fmt(now / p)}×` : "n/a"} |`);
  }
  L.push("");
  if (prev.evidence?.length) L.push("Evidence the previous run recorded:", "", ...prev.evidence.map((e) => `- ${e}`), "");
}

// Profiles.
const tbl = (f, n = 40) => (has(f) ? read(f).trimEnd().split("\n").slice(0, n) : null);
const profiled = [...new Set(files.map((f) => f.match(/^profile-([a-z0-9]+)-perf\.json$/)?.[1]).filter(Boolean))].sort();
if (profiled.length) {
  L.push("## Profiles of Runnel under load", "",
    "Steady loads (writes, fanout; run for 12 s here): 3 s into a separate run of the scenario, `perf record -a -e",
    "cpu-clock -F 499 -g -- sleep 4` (system-wide; this VM has no hardware counters, cpu-clock sampling works), then",
    "in another run `strace -c -f -p PID` for 4 s (strace slows the server down: read counts per append, not rates).",
    "Around each window Runnel's counters (/__runnel/metrics) and its threads' CPU are read, so work can be put per",
    "append. Burst loads (bootstrap): perf for the whole run on CLOCK_MONOTONIC, reported only for the window from",
    "the release of the clients to the last answer; strace with wall-clock stamps, counted in the same window.",
    "Percentages are of all samples on both cores; Runnel's threads and functions are those of its PID only.", "");
  for (const name of profiled) {
    const p = `profile-${name}`;
    L.push(`### ${name}`, "");
    const envP = runEnv(`${p}-perf`), envS = runEnv(`${p}-strace`);
    if (envP) L.push(`Load at start → end: perf run ${fmt(envP.load_start)} → ${fmt(envP.load_end)}${envP.quiet ? "" : " (not quiet)"}; strace run ${fmt(envS?.load_start)} → ${fmt(envS?.load_end)}${envS?.quiet ? "" : " (not quiet)"}.`, "");
    const windowStats = (pass) => {
      if (!has(`${p}-${pass}.t0`)) return null;
      const wall = Number(read(`${p}-${pass}.t1`)) - Number(read(`${p}-${pass}.t0`));
      const cpu = threadCpu(`${p}-${pass}.cpu0`, `${p}-${pass}.cpu1`);
      const d = metricsDelta(parseMetrics(`${p}-${pass}.metrics0`), parseMetrics(`${p}-${pass}.metrics1`));
      return { wall, cpu, wal: walFigures(d, wall) };
    };
    const wp = windowStats("perf"), ws = windowStats("strace");
    if (wp?.wal) {
      const w = wp.wal;
      L.push(`Perf window (${fmt(wp.wall)} s): ${fmt(w.appends_per_s)} appends/s, ${fmt(w.syncs_per_s)} fdatasyncs/s, ${fmt(w.records_per_batch)} appends per batch, sync mean ${fmt(w.sync_mean_ms)} ms (p50 ≤ ${fmt(w.sync_p50_ms)}, p99 ≤ ${fmt(w.sync_p99_ms)} ms)` +
        `${w.sse_events ? `, ${fmt(w.sse_events / wp.wall)} SSE events sent/s` : ""}; loop thread busy ${fmt((100 * wp.cpu.loop) / wp.wall)} % of one core, worker threads ${fmt((100 * wp.cpu.workers) / wp.wall)} %.`, "");
    }
    const comms = tbl(`${p}-comms.txt`, 8);
    if (comms) L.push("CPU samples by process (system-wide, both cores; `swapper` = idle):", "", "```", ...comms, "```", "");
    const cpus = tbl(`${p}-cpus.txt`, 10);
    if (cpus)
      L.push("… by CPU and process (on this VM the two vCPUs do not produce equal numbers of cpu-clock samples, so read",
        "shares within one CPU):", "", "```", ...cpus, "```", "");
    const threads = tbl(`${p}-threads.txt`, 8);
    if (threads) L.push("Runnel's samples by thread (the thread whose id is the PID is the loop):", "", "```", ...threads, "```", "");
    const syms = tbl(`${p}-syms.txt`, 25);
    if (syms) L.push("Runnel's top functions, self time:", "", "```", ...syms, "```", "");
    const inc = tbl(`${p}-inclusive.txt`, 25);
    if (inc) L.push("Runnel's top functions, including callees:", "", "```", ...inc, "```", "");
    if (has(`${p}.strace.txt`)) {
      const lines = read(`${p}.strace.txt`).split("\n").filter((l) => l.trim());
      if (ws?.wal && ws.wal.appends > 0) {
        const per = ws.wal.appends;
        const out = [];
        for (const l of lines.slice(0, 18)) {
          const m = l.match(/^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$/);
          out.push(m ? `${l}   ${(Number(m[1]) / per).toFixed(2).padStart(8)} per append` : l);
        }
        L.push(`Syscalls (strace window: ${fmt(per)} appends, ${fmt(ws.wal.syncs)} log batches, ${ws.wal.sse_events ? `${fmt(ws.wal.sse_events)} SSE events, ` : ""}loop thread ${fmt((100 * ws.cpu.loop) / ws.wall)} % busy under strace):`, "", "```", ...out, "```", "");
      } else {
        L.push("Syscalls:", "", "```", ...lines.slice(0, 24), "```", "");
      }
    }
  }
} else {
  L.push("## Profiles", "", "No profile was taken (perf unavailable or `--no-profile`).", "");
}
process.stdout.write(L.join("\n") + "\n");
