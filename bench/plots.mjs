// Draws the benchmark pictures of docs/bench/ with gnuplot (Debian's
// gnuplot-nox) from measured figures; it measures nothing itself.
//
//   node bench/plots.mjs headline [BENCHMARKS.md]
//     From the Results table of a bench/compare report (BENCHMARKS.md,
//     which bench/compare writes): docs/bench/writes.svg (appends/s and
//     append latency p50/p99, Runnel against the Node reference server, at
//     100 and 500 streams) and docs/bench/reads.svg (SSE fan-out delivery
//     latency, catch-up MB/s, replay completion), each bar a median of the
//     report's rounds, log scales (the two servers differ by 10-100x).
//   node bench/plots.mjs failover SERIES.json
//     From `node bench/cluster.mjs recovery --series SERIES.json`:
//     docs/bench/failover.svg, acknowledged appends per 100 ms through
//     leader SIGKILLs (marked), the gap each cost.
//
// bench/compare runs the first after writing its report; the figures'
// conditions (machine, load, rounds) are the report's.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
// where the pictures go: docs/bench, or RUNNEL_PLOTS_OUT (the smoke's)
const OUT = process.env.RUNNEL_PLOTS_OUT || path.join(ROOT, "docs/bench");

// The report's Results rows: figure -> [runnel, reference] (numbers; NaN
// for n/a).
function results(file) {
  const rows = new Map();
  const text = fs.readFileSync(file, "utf8");
  const section = text.slice(text.indexOf("## Results"));
  for (const line of section.split("\n").slice(4)) {
    if (!line.startsWith("| ")) break;
    const cells = line.split("|").map((c) => c.trim());
    const num = (c) => Number((c.split(" (")[0] || "").replace(/,/g, ""));
    rows.set(cells[1], [num(cells[2]), num(cells[3])]);
  }
  return rows;
}

function gnuplot(script, data) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "runnel-plots-"));
  for (const [name, rows] of Object.entries(data))
    fs.writeFileSync(path.join(dir, name), rows.map((r) => r.join("\t")).join("\n") + "\n");
  execFileSync("gnuplot", ["-e", `cd '${dir}'`, "-"], { input: script, stdio: ["pipe", "inherit", "inherit"] });
  fs.rmSync(dir, { recursive: true });
}

const STYLE = `
set terminal svg size 960,460 dynamic font "sans,12" background rgb "white"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set grid ytics
set key outside bottom center horizontal
set xtics nomirror
set ytics nomirror
`;

function headline(file = path.join(ROOT, "BENCHMARKS.md")) {
  const r = results(file);
  const get = (name) => {
    const v = r.get(name);
    if (!v) throw new Error(`${file}: no Results row "${name}"`);
    return v;
  };
  const w500 = get("writes, 500 streams × 256 B: appends/s"), w100 = get("writes, 100 streams × 256 B: appends/s");
  const lat = [
    ["p50, 500", get("writes, 500 streams: append latency p50 (ms)")],
    ["p99, 500", get("writes, 500 streams: append latency p99 (ms)")],
    ["p50, 100", get("writes, 100 streams: append latency p50 (ms)")],
    ["p99, 100", get("writes, 100 streams: append latency p99 (ms)")],
  ];
  fs.mkdirSync(OUT, { recursive: true });
  gnuplot(`${STYLE}
set output '${OUT}/writes.svg'
set multiplot layout 1,2 title "Appends of 256 B, each acknowledged after fdatasync (medians; ${path.basename(file)})"
set title "appends/s"
set yrange [100:200000]
plot 'rate' using 2:xtic(1) title "Runnel" lc rgb "#1f77b4", '' using 3 title "Node reference" lc rgb "#ff7f0e"
set title "append latency (ms), at 500 and 100 streams"
set yrange [0.5:20000]
plot 'lat' using 2:xtic(1) title "Runnel" lc rgb "#1f77b4", '' using 3 title "Node reference" lc rgb "#ff7f0e"
unset multiplot
`, {
    rate: [["\"500 streams\"", ...w500], ["\"100 streams\"", ...w100]],
    lat: lat.map(([n, v]) => [`"${n}"`, ...v]),
  });
  const fan = [["\"p50\"", ...get("fanout, 1,000 SSE subscribers @ 50 ev/s: delivery p50 (ms)")],
    ["\"p99\"", ...get("fanout: delivery p99 (ms)")]];
  const reads = [["\"catch-up x1\"", ...get("catch-up of 1 GiB, 1 client (MB/s)")],
    ["\"catch-up x2\"", ...get("catch-up of 1 GiB, 2 concurrent clients (MB/s total)")],
    ["\"replay x100\"", ...get("replay, 100 clients: aggregate MB/s")]];
  gnuplot(`${STYLE}
set output '${OUT}/reads.svg'
set multiplot layout 1,2 title "Reads (medians; ${path.basename(file)})"
set title "SSE fan-out, 1,000 readers at 50 events/s: delivery (ms)"
set yrange [1:2000]
plot 'fan' using 2:xtic(1) title "Runnel" lc rgb "#1f77b4", '' using 3 title "Node reference" lc rgb "#ff7f0e"
set title "catch-up of 1 GiB by 1 and 2 readers, replay by 100 (MB/s)"
set yrange [50:10000]
plot 'reads' using 2:xtic(1) title "Runnel" lc rgb "#1f77b4", '' using 3 title "Node reference" lc rgb "#ff7f0e"
unset multiplot
`, { fan, reads });
  console.log(`wrote ${OUT}/writes.svg, ${OUT}/reads.svg`);
}

function failover(file) {
  const s = JSON.parse(fs.readFileSync(file, "utf8"));
  const rows = s.buckets.map((n, i) => [(i * s.bucket_ms) / 1000, (n * 1000) / s.bucket_ms]);
  const kills = s.kills.map((k) => `set arrow from first ${k.at_ms / 1000}, graph 0 to first ${k.at_ms / 1000}, graph 1 nohead lc rgb "#d62728" dt 2`).join("\n");
  fs.mkdirSync(OUT, { recursive: true });
  gnuplot(`
set terminal svg size 900,380 dynamic font "sans,12" background rgb "white"
set output '${OUT}/failover.svg'
set title "3-node cluster, ${s.writers} producers: acknowledged appends/s through ${s.kills.length} leader SIGKILLs (dashed)"
set xlabel "seconds"
set ylabel "appends/s (per ${s.bucket_ms} ms)"
set grid
set key off
${kills}
plot 'series' using 1:2 with steps lw 1.5 lc rgb "#1f77b4"
`, { series: rows });
  console.log(`wrote ${OUT}/failover.svg`);
}

const [mode, arg] = process.argv.slice(2);
if (mode === "headline") headline(arg);
else if (mode === "failover" && arg) failover(arg);
else {
  console.error("usage: node bench/plots.mjs headline [BENCHMARKS.md] | failover SERIES.json");
  process.exit(2);
}
