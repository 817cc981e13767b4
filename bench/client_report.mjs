// Renders the "Client" section of BENCHMARKS.md (to stdout) from the results
// directory of bench/client.sh: meta.json, append-R.json / fanout-R.json per
// round, and each run's load and CPU files (TAG.env, .stat0/.stat1, .time,
// fanout-R.server_cpu), TAG.failed for a run that failed its checks. Every
// number printed comes from those files, except bench/client_limits.md (if
// present): the hand-written reading of what limits the targets.
// Usage: node bench/client_report.mjs RESULTS_DIR > client.md
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CLK_TCK, cell, condCell, fmt, mstat, runEnv, verdict } from "./report_util.mjs";

const dir = process.argv[2];
const read = (f) => readFileSync(join(dir, f), "utf8");
const has = (f) => existsSync(join(dir, f));
const meta = JSON.parse(read("meta.json"));
const ms = (h, k) => (h ? h[k] / 1000 : NaN);

// runs[kind] = [{round, r (the JSON), env, failed (messages or null)}]
const runs = { append: [], fanout: [] };
for (const f of readdirSync(dir)) {
  const m = f.match(/^(append|fanout)-(\d+)\.json$/);
  if (!m) continue;
  const tag = `${m[1]}-${m[2]}`;
  let r = null;
  try {
    r = JSON.parse(read(f));
  } catch {}
  const env = runEnv(dir, tag);
  if (r && m[1] === "fanout" && has(`${tag}.server_cpu`)) {
    const [a, b] = read(`${tag}.server_cpu`).trim().split(" ").map(Number);
    r.server_cpu_s = (b - a) / CLK_TCK;
  }
  if (env && r) env.other_s = env.busy_s - (r.server_cpu_s ?? NaN) - (env.bench_cpu_s ?? 0);
  const failed = has(`${tag}.failed`) ? read(`${tag}.failed`).trim().split("\n") : !r ? ["no report"] : null;
  runs[m[1]].push({ round: Number(m[2]), r, env, failed });
}
for (const k of Object.keys(runs)) runs[k].sort((a, b) => a.round - b.round);
const good = (kind) => runs[kind].filter((x) => !x.failed);

const linesPerS = (x) => x.r.lines / x.r.wall_s;
const p99Gap = (x) => ms(x.r.tail_delivery_latency, "p99_us") - ms(x.r.delivery_latency, "p99_us");
const tailKept = (x) => (100 * x.r.tail_delivered) / x.r.tail_expected;
const APPEND = [
  ["lines/s (100 B lines, stdin to acknowledged)", linesPerS],
  ["MB/s", (x) => x.r.input_bytes / x.r.wall_s / 1e6],
  ["wall time (s)", (x) => x.r.wall_s],
  ["writes (producer seqs) per run", (x) => x.r.summary?.writes],
  ["`runnel append` CPU (s, user + system)", (x) => x.env?.bench_cpu_s],
  ["… per line (µs)", (x) => (1e6 * x.env?.bench_cpu_s) / x.r.lines],
  ["server CPU (s)", (x) => x.r.server_cpu_s],
];
const FANOUT = [
  ["runnel-bench SSE readers: delivery p50 (ms)", (x) => ms(x.r.delivery_latency, "p50_us")],
  ["runnel-bench SSE readers: delivery p99 (ms)", (x) => ms(x.r.delivery_latency, "p99_us")],
  ["runnel-bench SSE readers: delivery max (ms)", (x) => ms(x.r.delivery_latency, "max_us")],
  ["runnel-bench SSE readers: delivered / expected (%)", (x) => (100 * x.r.delivered) / x.r.expected],
  ["`runnel tail -f`: delivery p50 (ms)", (x) => ms(x.r.tail_delivery_latency, "p50_us")],
  ["`runnel tail -f`: delivery p99 (ms)", (x) => ms(x.r.tail_delivery_latency, "p99_us")],
  ["`runnel tail -f`: delivery max (ms)", (x) => ms(x.r.tail_delivery_latency, "max_us")],
  ["`runnel tail -f`: delivered / expected (%)", tailKept],
  ["`runnel tail -f` p99 − SSE readers' p99, same run (ms)", p99Gap],
  ["`runnel tail -f` arrival − the same event's last SSE reader: p50 (ms)", (x) => x.r.tail_after_last_sse_p50_us / 1000],
  ["… p99 (ms)", (x) => x.r.tail_after_last_sse_p99_us / 1000],
  ["`runnel tail -f` CPU per process (s per run)", (x) => x.r.tail_cpu_s / x.r.tail_readers],
  ["server CPU (s per run)", (x) => x.r.server_cpu_s],
];

const L = [];
const rounds = Math.max(runs.append.length, runs.fanout.length);
L.push("## Client (`runnel append`, `runnel tail`)", "");
L.push(
  `Measured by \`bench/client.sh\` (method in its header) on ${meta.date}, runnel ${meta.commit}${meta.dirty ? " plus uncommitted changes" : ""},`,
  `${rounds} round(s) of both measurements, each run on a freshly started server with an empty data directory on the`,
  "root disk (`runnel serve --max-connections 12000 --max-live-reads 12000 --long-poll-timeout-ms 30000`, as in",
  `bench/compare); clients, server and load generator share the machine's ${meta.nproc} cores. Figures are medians over the`,
  "rounds with the range (min–max). The machine is shared with other engineers: before each run the script waited",
  `for a 1-minute load average below ${meta.quiet_load} (at most ${meta.quiet_max} s per run, ${meta.quiet_budget} s in all); each run's load is listed`,
  "below, and figures from a loaded machine say more about the machine than about the client.",
  ""
);
if (meta.smoke) L.push("**Smoke run (`--smoke`): tiny sizes, the figures mean nothing.**", "");
L.push("```sh",
  `QUIET_LOAD=${meta.quiet_load} QUIET_MAX=${meta.quiet_max} QUIET_BUDGET=${meta.quiet_budget} bench/client.sh --rounds ${meta.rounds} --lines ${meta.lines} --tails ${meta.tails}${meta.append_args ? ` --append-args "${meta.append_args}"` : ""} --record`,
  `cat input | runnel append --url URL STREAM --producer bench --state FILE --json${meta.append_args ? ` ${meta.append_args}` : ""}   # ${fmt(meta.lines)} lines × 100 B`,
  `runnel-bench ${meta.fanout_args} --tail-cmd "runnel tail -f" --tails ${meta.tails} --base URL --server-pid PID --json`,
  "```", "");

const table = (kind, title, figures) => {
  L.push(`| ${title} | median (range) |`, "|---|---|");
  for (const [label, get] of figures) L.push(`| ${label} | ${cell(mstat(good(kind).map(get)))} |`);
  L.push("");
};
table("append", `\`runnel append --producer\` from stdin, ${fmt(meta.lines)} lines`, APPEND);
table("fanout", `fan-out (${meta.fanout_args.replace(/^fanout /, "")}) with ${meta.tails} \`runnel tail -f\``, FANOUT);

L.push("Per run: lines/s or the two p99s, then seconds waited for quiet (✓ reached, ✗ gave up), 1-minute load",
  "average at the start → end, and CPU-seconds of *other* processes (the machine's busy time from /proc/stat minus",
  "the server's and the client's: `runnel append`, or runnel-bench with its tails; `cat` counts as other).", "",
  `| run | ${Array.from({ length: rounds }, (_, i) => `round ${i + 1}`).join(" | ")} |`,
  `|---|${"---|".repeat(rounds)}`);
const runCell = (x, what) => {
  if (!x) return "n/a";
  const head = x.failed ? `**failed**: ${x.failed.join("; ")}` : what(x);
  return `${head}; ${condCell(x.env)}`;
};
const row = (kind, what) =>
  L.push(`| ${kind} | ${Array.from({ length: rounds }, (_, i) => runCell(runs[kind].find((x) => x.round === i + 1), what)).join(" | ")} |`);
row("append", (x) => `${fmt(linesPerS(x))} lines/s`);
row("fanout", (x) => `tail p99 ${fmt(ms(x.r.tail_delivery_latency, "p99_us"))} ms, SSE p99 ${fmt(ms(x.r.delivery_latency, "p99_us"))} ms`);
const all = [...runs.append, ...runs.fanout].filter((x) => x.env);
L.push("", `${all.filter((x) => x.env.quiet).length} of ${all.length} runs started on a quiet machine (load < ${meta.quiet_load}).`, "");

const lps = mstat(good("append").map(linesPerS));
const gap = mstat(good("fanout").map(p99Gap));
const kept = mstat(good("fanout").map(tailKept));
L.push("### Targets (issue 18)", "", "| target | measured (median) | verdict |", "|---|---|---|");
L.push(`| \`runnel append --producer\` from stdin: ≥ 50,000 lines/s of 100 B into one stream | ${fmt(lps.med)} lines/s | ${verdict(lps.med, ">=", 50000)} |`);
L.push(`| \`runnel tail -f\` keeps up with the fan-out's rate (every event, every run) | ${fmt(kept.min)} % delivered (worst run) | ${kept.n ? (kept.min === 100 ? "**met**" : "**missed**") : "not measured"} |`);
L.push(`| … with p99 within 1 ms of runnel-bench's own readers | ${fmt(gap.med)} ms over (range ${fmt(gap.min)}–${fmt(gap.max)}) | ${!gap.n ? "not measured" : gap.med <= 1 ? "**met**" : `**missed** by ${fmt(gap.med - 1)} ms`} |`);
L.push("");

// What limits them: written by hand from a run's profiles
// (bench/client_limits.md), shown under the verdicts.
const limitsFile = join(dirname(fileURLToPath(import.meta.url)), "client_limits.md");
if (existsSync(limitsFile)) L.push(readFileSync(limitsFile, "utf8").trimEnd(), "");
process.stdout.write(L.join("\n") + "\n");
