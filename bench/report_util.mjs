// Helpers shared by the Markdown renderers of benchmark results
// (bench/compare_report.mjs, bench/client_report.mjs): number formatting,
// medians with their range, and the load / machine CPU recorded around a
// run by bench/quiet.sh (run_begin/run_end) plus /usr/bin/time's output.
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";

export const CLK_TCK = 100;

export const median = (xs) => {
  const s = [...xs].filter(Number.isFinite).sort((x, y) => x - y);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};

// Three significant figures at most, thousands separated; "n/a" for no value.
export const fmt = (v) =>
  v === Infinity
    ? "∞"
    : !Number.isFinite(v)
      ? "n/a"
      : Math.abs(v) >= 1000
        ? Math.round(v).toLocaleString("en-US")
        : Math.abs(v) >= 100
          ? v.toFixed(0)
          : Math.abs(v) >= 10
            ? v.toFixed(1)
            : v.toFixed(2);

// Median, min and max of the finite values of v, and how many there were.
export const mstat = (v) => {
  v = v.filter(Number.isFinite);
  return { med: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length };
};
// "median (min–max)", or "n/a".
export const cell = (s) => (s.n ? `${fmt(s.med)} (${fmt(s.min)}–${fmt(s.max)})` : "n/a");

// Load and machine CPU around the run DIR/TAG: TAG.env (waited_s, quiet,
// load_start, load_end), TAG.stat0/.stat1 (/proc/stat's cpu line before and
// after) and TAG.time (/usr/bin/time -f "%e %U %S" of the load generator).
// null when TAG.env is missing.
export function runEnv(dir, tag) {
  const path = (f) => join(dir, f);
  if (!existsSync(path(tag + ".env"))) return null;
  const env = {};
  for (const line of readFileSync(path(tag + ".env"), "utf8").split("\n")) {
    const m = line.match(/^(\w+)=(.*)$/);
    if (m) env[m[1]] = Number(m[2]);
  }
  const stat = (f) => (existsSync(path(f)) ? readFileSync(path(f), "utf8").trim().split(/\s+/).slice(1).map(Number) : null);
  const s0 = stat(tag + ".stat0"), s1 = stat(tag + ".stat1");
  if (s0 && s1) {
    const d = s1.map((v, i) => (v - s0[i]) / CLK_TCK);
    // user nice system idle iowait irq softirq steal: busy counts irq and
    // softirq time too (loopback TCP delivery runs there and is charged to
    // the interrupted task's own CPU time as well).
    env.busy_s = d[0] + d[1] + d[2] + d[5] + d[6];
    env.steal_s = d[7] ?? 0;
    env.iowait_s = d[4];
    env.total_s = d.slice(0, 8).reduce((x, y) => x + y, 0);
  }
  if (existsSync(path(tag + ".time"))) {
    const last = readFileSync(path(tag + ".time"), "utf8").trim().split("\n").pop().split(" ").map(Number);
    env.bench_wall_s = last[0];
    env.bench_cpu_s = last[1] + last[2];
  }
  return env;
}

// The verdict on a target "v op goal" (op ">=" or "<="), with the margin or
// the shortfall as a ratio.
export function verdict(v, op, goal) {
  if (!Number.isFinite(v)) return "not measured";
  if (op === ">=" ? v >= goal : v <= goal) return `**met** (${fmt(op === ">=" ? v / goal : goal / v)}× margin)`;
  if (op === ">=") return `**missed** by ${fmt(100 * (1 - v / goal))} % (needs ${fmt(goal / v)}×)`;
  return `**missed**: ${fmt(100 * (v / goal - 1))} % over (needs ${fmt(v / goal)}× less)`;
}

// One run's conditions (runEnv plus other_s: CPU-seconds of other processes).
export const condCell = (e) =>
  !e ? "n/a" : `${e.waited_s}s ${e.quiet ? "✓" : "✗"}, load ${fmt(e.load_start)}→${fmt(e.load_end)}, other ${fmt(e.other_s)} s`;
