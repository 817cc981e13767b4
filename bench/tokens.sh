#!/usr/bin/env bash
# Issue 31's fan-out floor and token-streaming benchmarks, in one session on
# this machine, alternating for --rounds rounds (default 5); each round:
#   1. floor      build-release/bench/runnel-floor: 1,000 raw loopback sockets,
#                 50 events/s of 64 B for 8 s, no server (bench/floor.c)
#   2. fanout1000 runnel-bench fanout, 1,000 SSE subscribers @ 50/s, 64 B, 8 s
#                 (bench/compare's fanout1000) against a fresh release Runnel
#   3. tokens     runnel-bench tokens (1,000 streams x 20 appends/s of 40 B, 10
#                 SSE readers each, 8 s; bench/sc_tokens.c) against a fresh
#                 release Runnel
#   4. tokens     the same against the Node reference server
# The targets: fan-out p50 and p99 <= 1.3 x the floor's (over >= 5 rounds);
# tokens: every delivery made, p99 append-to-delivery <= 20 ms, server CPU
# per delivery reported.
#
# Usage: bench/tokens.sh [--rounds N] [--out DIR] [--quick]
#   --quick  checks the pipeline: tiny sizes, 1 round, no waiting for quiet
#            (the figures mean nothing)
#
# Binaries: build-release/runnel and build-release/bench/{runnel-bench,
# runnel-floor} (build them first: cmake --build build-release --target
# runnel runnel-bench runnel-floor), copied to DIR/bin at the start so a
# rebuild during the run changes nothing. Every server is started fresh with
# an empty data directory under /var/tmp and stopped after its run. Runnel
# gets bench/compare's flags (--max-connections 12000 --max-live-reads
# 12000 --long-poll-timeout-ms 30000: tokens opens 11,000 connections), the
# reference `node bench/reference/start.mjs PORT DATA 30000 1024`.
#
# Before every run, bench/quiet.sh's wait_quiet (1-minute load average
# below QUIET_LOAD=1.0, QUIET_* variables) and the load at its start and
# end are recorded (TAG.env). Results in DIR (default: a new /tmp directory):
# TAG.json (the report), TAG.txt (stderr), TAG.time (the load generator's
# elapsed/user/system s), TAG.server_cpu (server CPU ticks before/after the
# load generator ran), TAG.env/stat0/stat1; the per-run lines and the medians
# are printed and kept in DIR/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/lib.sh
source bench/quiet.sh

rounds=5
quick=0
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) quick=1; rounds=1; QUIET_BUDGET=0; shift ;;
    *) echo "usage: bench/tokens.sh [--rounds N] [--out DIR] [--quick]" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out=$(mktemp -d /tmp/runnel-tokens.XXXXXX)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /var/tmp/runnel-tokens-data.XXXXXX) # on the root disk, not tmpfs
ulimit -n "$(ulimit -Hn)"

if [ ! -d bench/reference/node_modules/@durable-streams/server ]; then
  echo "tokens: installing the reference server (npm ci in bench/reference)"
  (cd bench/reference && npm ci --no-audit --no-fund >/dev/null) || exit 1
fi
bin="$out/bin"
mkdir -p "$bin"
cp build-release/runnel build-release/bench/runnel-bench build-release/bench/runnel-floor "$bin/" ||
  { echo "tokens: build the release binaries first (cmake --build build-release --target runnel runnel-bench runnel-floor)"; exit 1; }

FLOOR=(--connections 1000 --rate 50 --duration 8 --payload 64)
FANOUT=(fanout --subscribers 1000 --rate 50 --payload 64 --duration 8)
TOKENS=(tokens --streams 1000 --rate 20 --payload 40 --readers-per-stream 10 --duration 8)
if [ "$quick" -eq 1 ]; then
  FLOOR=(--connections 50 --rate 50 --duration 2 --payload 64)
  FANOUT=(fanout --subscribers 50 --rate 50 --payload 64 --duration 2)
  TOKENS=(tokens --streams 20 --rate 20 --payload 40 --readers-per-stream 5 --duration 2)
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "runnel: $(git describe --always --dirty --tags 2>/dev/null) (build-release)"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "kernel: $(uname -sr)"
  echo "rounds: $rounds"
  echo "floor: runnel-floor ${FLOOR[*]} --json"
  echo "fanout1000: runnel-bench ${FANOUT[*]} --base URL --server-pid PID --json"
  echo "tokens: runnel-bench ${TOKENS[*]} --base URL --server-pid PID --json"
  echo "quiet: load1 < $QUIET_LOAD, polled every ${QUIET_POLL}s, at most ${QUIET_MAX}s per wait, ${QUIET_BUDGET}s in all"
} >"$out/machine.txt"

SERVER_PID=""
# start NAME DATA LOG PORT: starts runnel or the reference; sets SERVER_PID.
start() {
  local name=$1 data=$2 log=$3 port=$4
  if [ "$name" = runnel ]; then
    start_server "$bin/runnel" "$data" "$port" "$log" --max-connections 12000 \
      --max-live-reads 12000 --long-poll-timeout-ms 30000
  else
    node bench/reference/start.mjs "$port" "$data" 30000 1024 >"$log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 100); do
      grep -q '^listening' "$log" && return 0
      kill -0 "$SERVER_PID" 2>/dev/null || { cat "$log"; return 1; }
      sleep 0.1
    done
    echo "reference server did not start"; cat "$log"; return 1
  fi
}

stop() {
  local log=$1
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID"
    for _ in $(seq 1 150); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$SERVER_PID" 2>/dev/null && { echo "server ignored SIGTERM" >>"$log"; kill -KILL "$SERVER_PID"; }
    wait "$SERVER_PID" 2>/dev/null
  fi
  SERVER_PID=""
}

server_cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$SERVER_PID/stat" 2>/dev/null; }

# line TAG: the per-run line of a finished run, from TAG.json.
line() {
  # shellcheck disable=SC2016 # JavaScript, not shell
  node -e '
    const fs = require("fs");
    const tag = process.argv[1];
    let r;
    try { r = JSON.parse(fs.readFileSync(tag + ".json", "utf8")); } catch { console.log("no report"); process.exit(0); }
    const ms = (h) => h ? (h.p50_us / 1000).toFixed(2) + " / " + (h.p99_us / 1000).toFixed(2) + " / " + (h.max_us / 1000).toFixed(1) : "-";
    const d = `delivered ${r.delivered}/${r.expected}`;
    let s;
    if (r.scenario === "tokens")
      s = `${r.appends_per_s.toFixed(0)} appends/s, ${d}, delivery p50/p99/max ${ms(r.delivery_latency)} ms, ` +
        `append p50/p99 ${ms(r.append_latency).split(" / ").slice(0, 2).join(" / ")} ms, server CPU ` +
        `${r.server_cpu_s.toFixed(2)} s = ${r.server_cpu_per_delivery_us.toFixed(2)} us/delivery, bench CPU ${r.bench_cpu_s.toFixed(2)} s`;
    else {
      s = `${d}, delivery p50/p99/max ${ms(r.delivery_latency)} ms`;
      if (fs.existsSync(tag + ".server_cpu")) {
        const [a, b] = fs.readFileSync(tag + ".server_cpu", "utf8").trim().split(" ").map(Number);
        s += `, server CPU ${((b - a) / 100).toFixed(2)} s`;
      } else if (r.cpu_s !== undefined) s += `, CPU ${r.cpu_s.toFixed(2)} s`;
    }
    if (r.errors) s += `, ${r.errors} errors: ${r.error_messages[0]}`;
    console.log(s);' "$1"
}

# report_line TAG NAME SERVER ROUND RC: prints and keeps the run's line.
report_line() {
  local tag=$1 name=$2 server=$3 round=$4 rc=$5
  printf '%-10s %-9s round %s: exit %s, load %s -> %s (waited %ss): %s\n' "$name" "$server" "$round" \
    "$rc" "$(grep load_start "$tag.env" | cut -d= -f2)" "$(grep load_end "$tag.env" | cut -d= -f2)" \
    "$QUIET_WAITED" "$(line "$tag")" | tee -a "$out/summary.txt"
  [ "$rc" -eq 0 ] || sed 's/^/    /' "$tag.txt" | tail -8
}

failed=0

run_floor() {
  local round=$1
  local tag="$out/floor-floor-$round"
  run_begin "$tag"
  /usr/bin/time -f '%e %U %S' -o "$tag.time" timeout 300 "$bin/runnel-floor" "${FLOOR[@]}" --json \
    >"$tag.json" 2>"$tag.txt"
  local rc=$?
  run_end "$tag"
  [ "$rc" -eq 0 ] || failed=1
  report_line "$tag" floor - "$round" "$rc"
}

# run_bench NAME SERVER ROUND ARGS...: fresh server, one runnel-bench run.
run_bench() {
  local name=$1 server=$2 round=$3
  shift 3
  local tag="$out/$name-$server-$round" data="$work/$name-$server-$round" port
  local log="$tag.server.log"
  port=$(free_port)
  mkdir -p "$data"
  run_begin "$tag"
  start "$server" "$data" "$log" "$port" || { echo "tokens: $server did not start"; failed=1; return; }
  local c0
  c0=$(server_cpu_ticks)
  /usr/bin/time -f '%e %U %S' -o "$tag.time" \
    timeout 900 "$bin/runnel-bench" "$@" --base "http://127.0.0.1:$port" --server-pid "$SERVER_PID" --json \
    >"$tag.json" 2>"$tag.txt"
  local rc=$?
  echo "$c0 $(server_cpu_ticks)" >"$tag.server_cpu"
  run_end "$tag"
  stop "$log"
  rm -rf "$data"
  [ "$rc" -eq 0 ] || failed=1
  report_line "$tag" "$name" "$server" "$round" "$rc"
}

: >"$out/summary.txt"
t_begin=$SECONDS
for round in $(seq 1 "$rounds"); do
  run_floor "$round"
  run_bench fanout1000 runnel "$round" "${FANOUT[@]}"
  run_bench tokens runnel "$round" "${TOKENS[@]}"
  run_bench tokens reference "$round" "${TOKENS[@]}"
  echo "round $round done ($(( (SECONDS - t_begin) / 60 )) min so far)"
done
rm -rf "$work"

# Medians over the rounds (runs whose report is missing are left out).
node - "$out" <<'EOF' | tee -a "$out/summary.txt"
const fs = require("fs");
const dir = process.argv[2];
const runs = {};
for (const f of fs.readdirSync(dir)) {
  const m = f.match(/^(floor|fanout1000|tokens)-([a-z]+)-(\d+)\.json$/);
  if (!m) continue;
  let r;
  try { r = JSON.parse(fs.readFileSync(`${dir}/${f}`, "utf8")); } catch { continue; }
  (runs[`${m[1]}-${m[2]}`] ??= []).push({ round: Number(m[3]), r });
}
const median = (xs) => {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return NaN;
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};
const ms = (x) => (Number.isFinite(x) ? (x / 1000).toFixed(2) : "-");
const med = (k, f) => median((runs[k] ?? []).map((x) => f(x.r)));
console.log("\nmedians over the rounds:");
const fl = (f) => med("floor-floor", f), fo = (f) => med("fanout1000-runnel", f);
const fp50 = fl((r) => r.delivery_latency.p50_us), fp99 = fl((r) => r.delivery_latency.p99_us);
const op50 = fo((r) => r.delivery_latency.p50_us), op99 = fo((r) => r.delivery_latency.p99_us);
console.log(`floor       ${(runs["floor-floor"] ?? []).length} runs: p50 ${ms(fp50)} ms, p99 ${ms(fp99)} ms, max ${ms(fl((r) => r.delivery_latency.max_us))} ms`);
console.log(`fanout1000  ${(runs["fanout1000-runnel"] ?? []).length} runs: p50 ${ms(op50)} ms, p99 ${ms(op99)} ms, max ${ms(fo((r) => r.delivery_latency.max_us))} ms`);
// per round: fan-out / floor of the same round
const ratios = (key) => {
  const floors = Object.fromEntries((runs["floor-floor"] ?? []).map((x) => [x.round, x.r]));
  return (runs["fanout1000-runnel"] ?? []).filter((x) => floors[x.round])
    .map((x) => x.r.delivery_latency[key] / floors[x.round].delivery_latency[key]);
};
const fmtr = (xs) => xs.map((x) => x.toFixed(2)).join(" ");
console.log(`fanout / floor: p50 ${(op50 / fp50).toFixed(2)}x, p99 ${(op99 / fp99).toFixed(2)}x (target <= 1.3x); per round p50 [${fmtr(ratios("p50_us"))}], p99 [${fmtr(ratios("p99_us"))}]`);
for (const server of ["runnel", "reference"]) {
  const k = `tokens-${server}`, n = (runs[k] ?? []).length;
  if (!n) continue;
  const t = (f) => med(k, f);
  const complete = runs[k].filter((x) => x.r.delivered >= x.r.expected && x.r.expected > 0).length;
  console.log(`tokens ${server.padEnd(9)} ${n} runs: ${t((r) => r.appends_per_s).toFixed(0)} appends/s, ` +
    `every delivery made in ${complete}/${n}, delivered/expected ${t((r) => r.delivered / r.expected).toFixed(5)}, ` +
    `delivery p50 ${ms(t((r) => r.delivery_latency.p50_us))} p99 ${ms(t((r) => r.delivery_latency.p99_us))} ` +
    `max ${ms(t((r) => r.delivery_latency.max_us))} ms (target p99 <= 20 ms), ` +
    `append p50 ${ms(t((r) => r.append_latency.p50_us))} p99 ${ms(t((r) => r.append_latency.p99_us))} ms, ` +
    `server CPU ${t((r) => r.server_cpu_s).toFixed(2)} s = ${t((r) => r.server_cpu_per_delivery_us).toFixed(2)} us/delivery, ` +
    `bench CPU ${t((r) => r.bench_cpu_s).toFixed(2)} s of ${t((r) => r.measured_s).toFixed(2)} s`);
}
EOF
echo "tokens: $(( (SECONDS - t_begin) / 60 )) min; results in $out"
exit "$failed"
