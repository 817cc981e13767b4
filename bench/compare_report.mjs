// Renders BENCHMARKS.md (to stdout) from the raw results directory that
// bench/compare fills: per-run JSON reports of runnel-bench, per-thread
// server CPU snapshots, micro-benchmark JSON, and perf/strace summaries.
// Every number printed comes from those files; a figure with no data says so.
// Usage: node bench/compare_report.mjs RESULTS_DIR > BENCHMARKS.md
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2];
const files = readdirSync(dir);
const read = (f) => readFileSync(join(dir, f), "utf8");
const json = (f) => {
  try {
    return JSON.parse(read(f));
  } catch {
    return null;
  }
};
const SERVERS = ["runnel", "reference"];
const CLK_TCK = 100;

// runs[scenario][server] = [report, ...] (one per round; failed runs kept for errors)
const runs = {};
for (const f of files) {
  const m = f.match(/^([a-z0-9]+)-(runnel|reference)-(\d+)\.json$/);
  if (!m) continue;
  const r = json(f);
  if (!r) continue;
  r._cpu = threadCpu(f.replace(/\.json$/, ""));
  ((runs[m[1]] ??= {})[m[2]] ??= []).push(r);
}

// Server CPU seconds between the .cpu0 and .cpu1 snapshots: `loop` is the
// main thread (the lowest thread id, equal to the PID), `workers` all others
// (libuv's pool: the log's batch write + fdatasync, checkpoints).
function threadCpu(tag) {
  const snap = (ext) => {
    const out = new Map();
    if (!existsSync(join(dir, tag + ext))) return out;
    for (const line of read(tag + ext).split("\n")) {
      const [tid, comm, u, s] = line.split("\t");
      if (tid) out.set(tid, { comm, ticks: Number(u) + Number(s) });
    }
    return out;
  };
  const a = snap(".cpu0"), b = snap(".cpu1");
  const main = Math.min(...[...b.keys()].map(Number));
  const out = { loop: 0, workers: 0 };
  for (const [tid, t] of b) {
    const secs = (t.ticks - (a.get(tid)?.ticks ?? 0)) / CLK_TCK;
    out[Number(tid) === main ? "loop" : "workers"] += secs;
  }
  return out;
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const fmt = (v) =>
  !Number.isFinite(v)
    ? "n/a"
    : Math.abs(v) >= 1000
      ? Math.round(v).toLocaleString("en-US")
      : Math.abs(v) >= 100
        ? v.toFixed(0)
        : Math.abs(v) >= 10
          ? v.toFixed(1)
          : v.toFixed(2);

const ms = (h, k) => (h ? h[k] / 1000 : NaN);
const cpuTotal = (r) => Object.values(r._cpu).reduce((a, b) => a + b, 0);
// [scenario, label, getter, better]
const FIGURES = [
  ["writes500", "writes, 500 streams × 256 B: appends/s", (r) => r.appends_per_s, "higher"],
  ["writes500", "writes, 500 streams: append latency p50 (ms)", (r) => ms(r.append_latency, "p50_us"), "lower"],
  ["writes500", "writes, 500 streams: append latency p99 (ms)", (r) => ms(r.append_latency, "p99_us"), "lower"],
  ["writes500", "writes, 500 streams: append latency max (ms)", (r) => ms(r.append_latency, "max_us"), "lower"],
  ["writes500", "writes, 500 streams: server CPU (s per run)", cpuTotal, "lower"],
  ["writes100", "writes, 100 streams × 256 B: appends/s", (r) => r.appends_per_s, "higher"],
  ["writes100", "writes, 100 streams: append latency p50 (ms)", (r) => ms(r.append_latency, "p50_us"), "lower"],
  ["writes100", "writes, 100 streams: append latency p99 (ms)", (r) => ms(r.append_latency, "p99_us"), "lower"],
  ["fanout1000", "fanout, 1,000 SSE subscribers @ 50 ev/s: delivery p50 (ms)", (r) => ms(r.delivery_latency, "p50_us"), "lower"],
  ["fanout1000", "fanout: delivery p99 (ms)", (r) => ms(r.delivery_latency, "p99_us"), "lower"],
  ["fanout1000", "fanout: delivery max (ms)", (r) => ms(r.delivery_latency, "max_us"), "lower"],
  ["fanout1000", "fanout: delivered / expected (%)", (r) => (100 * r.delivered) / r.expected, "higher"],
  ["fanout1000", "fanout: server CPU (s per run)", cpuTotal, "lower"],
  ["catchup1g", "catch-up of 1 GiB, 1 client (MB/s)", (r) => r.one_mb_per_s, "higher"],
  ["catchup1g", "catch-up of 1 GiB, 2 concurrent clients (MB/s total)", (r) => r.many_mb_per_s, "higher"],
  ["catchup1g", "pre-fill of 1 GiB in 4 MiB appends (MB/s)", (r) => r.fill_mb_per_s, "higher"],
  ["longpoll10k", "long-poll, 10,000 parked readers: server RSS parked (MiB)", (r) => r.server_rss_parked_kib / 1024, "lower"],
  ["longpoll10k", "long-poll: server RSS peak (MiB)", (r) => r.server_rss_peak_kib / 1024, "lower"],
  ["longpoll10k", "long-poll: append-to-wake p50 (ms)", (r) => ms(r.wake_latency, "p50_us"), "lower"],
  ["longpoll10k", "long-poll: append-to-wake p99 (ms)", (r) => ms(r.wake_latency, "p99_us"), "lower"],
  ["longpoll10k", "long-poll: delivered / expected (%)", (r) => (100 * r.delivered) / r.expected, "higher"],
  ["bootstrap100", "replay, 100 clients × 256 KB at once: completion p50 (ms)", (r) => ms(r.completion_latency, "p50_us"), "lower"],
  ["bootstrap100", "replay: completion p99 (ms)", (r) => ms(r.completion_latency, "p99_us"), "lower"],
  ["bootstrap100", "replay: aggregate MB/s", (r) => r.replay_mb_per_s, "higher"],
];

// A run counts when it reported no error (older reports of scenarios with a
// writer could end without error after acknowledging no append: not valid).
const valid = (r) => r.errors === 0 && (r.appends ?? 1) > 0;
// stats(scenario, server, getter) over the valid runs.
function stats(sc, server, get) {
  const rs = (runs[sc]?.[server] ?? []).filter(valid);
  const v = rs.map(get).filter(Number.isFinite);
  return { med: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length };
}
const cell = (s) => (s.n ? `${fmt(s.med)} (${fmt(s.min)}–${fmt(s.max)})` : "n/a");

const L = [];
const machine = read("machine.txt").trim().split("\n");
const get = (k) => machine.find((l) => l.startsWith(k + ":"))?.slice(k.length + 2) ?? "?";
L.push("# Benchmarks", "");
L.push(
  "Measured by `bench/compare` (see README, \"Benchmarks\"): every scenario of `runnel-bench` against Runnel",
  "and against the Node reference server, alternating (A B A B), each run on a freshly started server with",
  "an empty data directory. Both servers acknowledge appends only after `fdatasync`. The load generator",
  "runs on the same machine; nothing is pinned (`taskset` not used): server and load generator share both",
  "cores. Figures are medians over the rounds with the range (min–max) in brackets.",
  ""
);
L.push("## Machine", "");
for (const k of ["date", "runnel", "reference", "node", "nproc", "cpu", "memory", "kernel", "disk", "rounds"])
  L.push(`- ${k}: ${get(k)}`);
L.push("", "## Commands", "", "```sh", "bench/compare            # this whole page");
for (const line of read("commands.txt").trim().split("\n")) {
  const [name, cmd] = line.split("|");
  L.push(`${cmd}   # ${name}`);
}
L.push(
  "runnel-micro-json --seconds 2 --json",
  "runnel-micro-wal --dir /var/tmp/… --concurrency {1,64,512} --record-bytes 256 --seconds 3 --json",
  "runnel-micro-wal --dir /dev/shm --concurrency 64 --record-bytes 256 --seconds 3 --json",
  "```",
  "",
  "Runnel is started as `runnel serve --max-connections 12000 --long-poll-timeout-ms 30000` (other settings",
  "default); the reference as `node bench/reference/start.mjs PORT DATA_DIR 30000 1024`: file-backed store",
  "with its pool of open stream files raised from the package's 100 to 1,024 (with 100, appends to more than",
  "100 streams at once get 404 when a handle is evicted between write and fsync; see the comment in start.mjs).",
  ""
);

L.push("## Results", "", "| figure | Runnel | reference | Runnel / reference |", "|---|---|---|---|");
for (const [sc, label, g] of FIGURES) {
  const a = stats(sc, "runnel", g), b = stats(sc, "reference", g);
  const ratio = a.n && b.n && b.med ? `${fmt(a.med / b.med)}×` : "n/a";
  L.push(`| ${label} | ${cell(a)} | ${cell(b)} | ${ratio} |`);
}
L.push("");

// Runs that failed (protocol errors, timeouts).
const failures = [];
for (const [sc, byServer] of Object.entries(runs))
  for (const [server, rs] of Object.entries(byServer))
    for (const r of rs)
      if (r.errors) failures.push(`- ${sc} on ${server}: ${r.errors} error(s): ${r.error_messages.slice(0, 3).join("; ")}`);
      else if (!valid(r)) failures.push(`- ${sc} on ${server}: no append was acknowledged during the writing phase`);
const missingRuns = [];
for (const sc of new Set(FIGURES.map((f) => f[0])))
  for (const server of SERVERS) if (!runs[sc]?.[server]?.length) missingRuns.push(`- ${sc} on ${server}: no report`);
if (failures.length || missingRuns.length) {
  L.push("Runs excluded from the figures (they reported errors or produced no report):", "", ...failures, ...missingRuns, "");
}

// Server CPU by thread (Runnel: the loop thread vs libuv's worker threads).
L.push("### Server CPU by thread (Runnel, median CPU seconds per run)", "",
  "| scenario | loop thread (main) | worker threads (log write + fdatasync, checkpoints) |", "|---|---|---|");
for (const sc of Object.keys(runs).sort()) {
  const rs = (runs[sc].runnel ?? []).filter(valid);
  if (!rs.length) continue;
  L.push(`| ${sc} | ${fmt(median(rs.map((r) => r._cpu.loop)))} | ${fmt(median(rs.map((r) => r._cpu.workers)))} |`);
}
L.push("", "CPU covers the whole run including setup (stream creation, pre-fill), from /proc/PID/task/*/stat.", "");

// Micro-benchmarks.
L.push("## Micro-benchmarks (Runnel only)", "", "| figure | median (range) |", "|---|---|");
const micro = (prefix) => files.filter((f) => f.startsWith(prefix) && f.endsWith(".json")).map(json).filter(Boolean);
const mj = micro("micro-json-");
const mstat = (v) => ({ med: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length });
const JSON_INPUTS = { small: "1 KiB bodies of ten ~100 B objects", objects: "1 MiB array of typical objects", strings: "1 MiB array of 64 KiB strings" };
for (const [k, label] of Object.entries(JSON_INPUTS))
  L.push(`| rn_json_to_messages, ${label} (MB/s) | ${cell(mstat(mj.map((r) => r[k]?.mb_per_s)))} |`);
for (const k of [1, 64, 512])
  L.push(`| WAL appends, 256 B records, ${k} in flight, root disk with fdatasync (records/s) | ${cell(mstat(micro(`micro-wal-disk-k${k}-`).map((r) => r.records_per_s)))} |`);
L.push(`| WAL appends, 256 B records, 64 in flight, tmpfs /dev/shm — same code, fdatasync nearly free, **not** a no-sync mode (records/s) | ${cell(mstat(micro("micro-wal-shm-k64-").map((r) => r.records_per_s)))} |`);
L.push("| BLAKE3 hashing | TODO: no BLAKE3 micro-benchmark yet |", "");

// Targets of issue 7.
const S = (sc, server, g) => stats(sc, server, g).med;
const fig = (sc, i) => FIGURES.filter((f) => f[0] === sc)[i][2];
const jsonMin = Math.min(median(mj.map((r) => r.objects?.mb_per_s)), median(mj.map((r) => r.strings?.mb_per_s)));
const TARGETS = [
  ["writes, 500 streams × 256 B: ≥ 40,000 appends/s", S("writes500", "runnel", fig("writes500", 0)), ">=", 40000, "appends/s"],
  ["writes, 500 streams: p99 ≤ 25 ms", S("writes500", "runnel", fig("writes500", 2)), "<=", 25, "ms"],
  ["writes, 500 streams: ≥ 10× the reference", S("writes500", "runnel", fig("writes500", 0)) / S("writes500", "reference", fig("writes500", 0)), ">=", 10, "×"],
  ["writes, 100 streams: p99 ≤ 5 ms", S("writes100", "runnel", fig("writes100", 2)), "<=", 5, "ms"],
  ["fanout, 1,000 subscribers @ 50 events/s: p99 ≤ 5 ms", S("fanout1000", "runnel", fig("fanout1000", 1)), "<=", 5, "ms"],
  ["catch-up of 1 GiB, one client: ≥ 1 GB/s", S("catchup1g", "runnel", fig("catchup1g", 0)), ">=", 1000, "MB/s"],
  ["JSON validation ≥ 1 GB/s on 1 MiB inputs (slower of objects/strings)", jsonMin, ">=", 1000, "MB/s"],
  ["10,000 parked long-polls ≤ 100 MiB server RSS", S("longpoll10k", "runnel", fig("longpoll10k", 0)), "<=", 100, "MiB"],
];
L.push("## Targets (issue 7: 2 cores, load generator on the same machine, appends acknowledged after fsync)", "");
L.push("| target | measured (median) | verdict |", "|---|---|---|");
for (const [label, v, op, goal, unit] of TARGETS) {
  let verdict;
  if (!Number.isFinite(v)) verdict = "not measured";
  else if (op === ">=" ? v >= goal : v <= goal) verdict = `**met** (${fmt(op === ">=" ? v / goal : goal / v)}× margin)`;
  else if (op === ">=") verdict = `**missed** by ${fmt(100 * (1 - v / goal))} % (needs ${fmt(goal / v)}×)`;
  else verdict = `**missed**: ${fmt(100 * (v / goal - 1))} % over (needs ${fmt(v / goal)}× less)`;
  L.push(`| ${label} | ${fmt(v)} ${unit} | ${verdict} |`);
}
L.push("");

// Profiles.
const profiled = files.filter((f) => /^perf-[a-z0-9]+\.txt$/.test(f));
if (profiled.length) {
  L.push("## Profiles of Runnel under load", "");
  L.push("`perf record -e cpu-clock -F 499 -g -p PID -- sleep 4` (this VM has no hardware counters; cpu-clock",
    "sampling works) 3 s into a separate run of the scenario; then `strace -c -f -p PID` for 4 s in another run",
    "(strace slows the server down: read the counts as proportions, not rates).", "");
  for (const f of profiled) {
    const name = f.slice(5, -4);
    L.push(`### ${name}`, "", "Samples by thread:", "", "```", read(`perf-${name}-threads.txt`).trimEnd(), "```", "",
      "Top functions (self time, all threads):", "", "```", read(f).trimEnd(), "```", "");
    if (existsSync(join(dir, `strace-${name}.txt`))) {
      const st = read(`strace-${name}.txt`).split("\n").filter((l) => l.trim()).slice(0, 16);
      L.push("Syscalls:", "", "```", ...st, "```", "");
    }
  }
} else {
  L.push("## Profiles", "", "No profile was taken (perf unavailable or `--no-profile`).", "");
}
process.stdout.write(L.join("\n") + "\n");
