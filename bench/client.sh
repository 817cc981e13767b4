#!/usr/bin/env bash
# Benchmarks of the command-line client against its targets (issue 18),
# each run on a freshly started Runnel (flags as in bench/compare) with an
# empty data directory under /var/tmp. Raw results go to OUT as JSON;
# bench/client_report.mjs renders them to OUT/client.md, and --record copies
# that to bench/client.md, which bench/compare_report.mjs puts into
# BENCHMARKS.md ("Client").
#
#   append-R.json  `runnel append STREAM --producer P` reading --lines lines
#                  of 100 B (99 characters and LF, each line different) from
#                  stdin: a pipe from `cat` of a file prepared beforehand (in
#                  the page cache), into one new text/plain stream, with the
#                  command's defaults (window 4, batches up to 1 MiB). Timed
#                  from the start of the `runnel append` process to its exit,
#                  so it includes its HEAD, the producer's state file and the
#                  wait for the last acknowledgement: lines/s = lines / that
#                  wall time. Afterwards `runnel read` must give back the
#                  input byte for byte (cmp), and the command's --json summary
#                  must count every byte; otherwise the run fails.
#   fanout-R.json  runnel-bench's fanout1000 scenario of bench/compare (1,000
#                  SSE subscribers, one writer at 50 events/s of 64 B for 8 s)
#                  with --tails `runnel tail -f` processes reading the same
#                  stream (runnel-bench --tail-cmd; they start right after
#                  the stream is created and read from offset -1).
#
# How delivery is timed, the same way for both kinds of reader: the writer
# (runnel-bench) puts its send time (CLOCK_MONOTONIC, uv_hrtime(), ns) into
# each payload ('T' and 16 hex digits, padded with '.'). runnel-bench's SSE
# readers take uv_hrtime() when its loop handles the socket read carrying
# the event; each `runnel tail -f` writes what it gets to its stdout, a pipe
# that the same loop reads, and the time is taken when a complete 64 B
# record comes out of the pipe. Both are send-to-arrival in the one process
# on the one clock; the tail's also holds its SSE parsing, its write to
# stdout and the pipe hop, which is what a program reading `runnel tail -f`
# sees. Every record of a tail must equal, byte for byte, the next payload
# sent (else the run fails); a tail that fell behind shows in delivered /
# expected (with --smoke every tail must print every acknowledged payload).
# The tails start first, so they are the server's oldest waiters, and it
# wakes the newest first: runnel-bench also reports each tail arrival minus
# the same event's last SSE arrival, which tells that place in line from
# the tail's own cost.
#
# The machine is shared: before every run the script waits for a quiet
# machine (bench/quiet.sh: 1-minute load below QUIET_LOAD, bounded by
# QUIET_MAX per wait and QUIET_BUDGET in all) and records the load average
# at its start and end and the CPU time other processes used meanwhile.
#
# Usage: bench/client.sh [--bin DIR] [--out DIR] [--rounds N] [--lines N]
#                        [--tails N] [--append-args "ARGS"] [--record] [--smoke]
#   --bin DIR   runnel and runnel-bench (DIR/runnel-bench or
#               DIR/bench/runnel-bench); default: build plain, copy to OUT/bin
#   --rounds N  rounds of both measurements (default 3)
#   --lines N   input lines of the append measurement (default 2000000)
#   --tails N   `runnel tail -f` processes in the fan-out (default 3)
#   --append-args  extra flags for `runnel append` (say, --window 1), recorded
#   --record    also write bench/client.md
#   --smoke     a short check that the script works (tiny sizes, 1 round,
#               no waiting for quiet); asserts the bytes, never a speed
# Exits 0 when every run passed its checks.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/quiet.sh

bin=""
out=""
rounds=3
lines=2000000
tails=3
append_args=""
record=0
smoke=0
usage="usage: bench/client.sh [--bin DIR] [--out DIR] [--rounds N] [--lines N] [--tails N] [--append-args ARGS] [--record] [--smoke]"
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --lines) lines=$2; shift 2 ;;
    --tails) tails=$2; shift 2 ;;
    --append-args) append_args=$2; shift 2 ;;
    --record) record=1; shift ;;
    --smoke) smoke=1; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
fanout_args=(fanout --subscribers 1000 --rate 50 --payload 64 --duration 8)
if [ "$smoke" -eq 1 ]; then
  rounds=1
  lines=20000
  tails=2
  QUIET_BUDGET=0
  fanout_args=(fanout --subscribers 5 --rate 50 --payload 64 --duration 1)
fi
[ -n "$out" ] || out=$(mktemp -d /tmp/runnel-client.XXXXXX)
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -z "$bin" ]; then
  bin="$out/bin"
  build_bench_bin "$bin" || exit 1
fi
bench="$bin/runnel-bench"
[ -x "$bench" ] || bench="$bin/bench/runnel-bench"
runnel="$bin/runnel"
[ -x "$runnel" ] && [ -x "$bench" ] || { echo "client.sh: no runnel or runnel-bench in $bin" >&2; exit 2; }
work=$(mktemp -d /var/tmp/runnel-client.XXXXXX) # on the root disk, not tmpfs
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill -KILL "$SERVER_PID" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"

# server_cpu_ticks: user + system clock ticks of the server so far.
server_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$SERVER_PID/stat"; }

# launch TAG: a fresh server with an empty data directory; sets BASE.
launch() {
  local tag=$1 port
  rm -rf "$work/data"
  mkdir -p "$work/data"
  port=$(free_port)
  start_server "$runnel" "$work/data" "$port" "$out/$tag.server.log" --max-connections 12000 \
    --max-live-reads 12000 --long-poll-timeout-ms 30000 || return 1
  BASE="http://127.0.0.1:$port"
}

# finish TAG: stops the server (a failed stop fails the run).
finish() {
  local tag=$1
  stop_server "$out/$tag.server.log" >>"$out/$tag.log" 2>&1 || { echo "server did not stop cleanly" >>"$out/$tag.log"; return 1; }
}

# The input: line i is "line " + i in 10 digits + '.' padding, 100 B with LF.
input="$work/input"
awk -v n="$lines" 'BEGIN { pad = sprintf("%84s", ""); gsub(/ /, ".", pad);
  for (i = 0; i < n; i++) printf "line %010d%s\n", i, pad }' >"$input"
input_bytes=$(stat -c %s "$input")
[ "$input_bytes" -eq $((lines * 100)) ] || { echo "client.sh: input is $input_bytes bytes" >&2; exit 1; }

# fail TAG MESSAGE: records a failed check of a run (TAG.failed).
fail() {
  echo "FAIL $1: $2"
  echo "$2" >>"$out/$1.failed"
}

# measure_append ROUND
measure_append() {
  local tag="append-$1" stream="client-append-$1" s0 s1 t0 t1 code
  launch "$tag" || { fail "$tag" "server did not start"; return; }
  "$runnel" create --url "$BASE" "$stream" --type text/plain >>"$out/$tag.log" 2>&1 ||
    { fail "$tag" "create failed"; finish "$tag"; return; }
  cat "$input" >/dev/null # in the page cache before the clock starts
  run_begin "$out/$tag"
  s0=$(server_cpu_ticks)
  t0=$(date +%s%N)
  # shellcheck disable=SC2086 # --append-args is a list of words
  cat "$input" | /usr/bin/time -f "%e %U %S" -o "$out/$tag.time" "$runnel" append --url "$BASE" \
    "$stream" --producer bench --state "$work/$tag.state" --json $append_args \
    >"$out/$tag.summary.json" 2>>"$out/$tag.log"
  code=$?
  t1=$(date +%s%N)
  s1=$(server_cpu_ticks)
  run_end "$out/$tag"
  if [ "$code" -ne 0 ]; then
    fail "$tag" "runnel append exited $code"
  elif ! "$runnel" read --url "$BASE" "$stream" 2>>"$out/$tag.log" | cmp -s - "$input"; then
    fail "$tag" "the stream does not hold exactly the input"
  elif ! grep -q "\"bytes\":$input_bytes[,}]" "$out/$tag.summary.json"; then
    fail "$tag" "the summary does not count $input_bytes bytes: $(cat "$out/$tag.summary.json")"
  fi
  finish "$tag" || fail "$tag" "server did not stop cleanly"
  cat >"$out/$tag.json" <<EOF
{"lines":$lines,"line_bytes":100,"input_bytes":$input_bytes,"wall_s":$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", (b - a) / 1e9 }'),
 "server_cpu_s":$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.2f", (b - a) / 100 }'),
 "append_args":"$append_args","ok":$([ -f "$out/$tag.failed" ] && echo false || echo true),
 "summary":$(cat "$out/$tag.summary.json" 2>/dev/null | grep -m1 '^{' || echo null)}
EOF
}

# measure_fanout ROUND
measure_fanout() {
  local tag="fanout-$1" s0 s1 code
  launch "$tag" || { fail "$tag" "server did not start"; return; }
  run_begin "$out/$tag"
  s0=$(server_cpu_ticks)
  /usr/bin/time -f "%e %U %S" -o "$out/$tag.time" "$bench" "${fanout_args[@]}" \
    --tail-cmd "$runnel tail -f" --tails "$tails" --base "$BASE" --server-pid "$SERVER_PID" \
    --json >"$out/$tag.json" 2>>"$out/$tag.log"
  code=$?
  s1=$(server_cpu_ticks)
  run_end "$out/$tag"
  echo "$s0 $s1" >"$out/$tag.server_cpu"
  if [ "$code" -ne 0 ]; then
    fail "$tag" "runnel-bench exited $code: $(grep -o '"error_messages":\[[^]]*' "$out/$tag.json")"
  else
    # Each record a tail printed was checked against the payload sent; here
    # nothing else may follow them. Falling behind is a figure, not a
    # failure, except in --smoke: there every tail must print every byte.
    node -e '
      const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      const smoke = process.argv[2] === "1", bad = [];
      if (!(r.appends > 0)) bad.push("no append was acknowledged");
      if (r.tail_bytes !== r.tail_delivered * r.payload_bytes)
        bad.push(`tails printed ${r.tail_bytes} bytes for ${r.tail_delivered} payloads of ${r.payload_bytes} B`);
      if (smoke && r.tail_bytes !== r.tail_bytes_expected)
        bad.push(`tails printed ${r.tail_bytes} bytes, expected ${r.tail_bytes_expected}`);
      if (bad.length) { console.log(bad.join("; ")); process.exit(1); }' "$out/$tag.json" "$smoke" >"$out/$tag.check" ||
      fail "$tag" "$(cat "$out/$tag.check")"
  fi
  finish "$tag" || fail "$tag" "server did not stop cleanly"
}

{
  echo "{\"date\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"commit\":\"$(git rev-parse --short HEAD)\","
  echo " \"dirty\":$([ -n "$(git status --porcelain -- src bench include CMakeLists.txt)" ] && echo true || echo false),"
  echo " \"rounds\":$rounds,\"lines\":$lines,\"tails\":$tails,\"append_args\":\"$append_args\","
  echo " \"fanout_args\":\"${fanout_args[*]}\",\"nproc\":$(nproc),\"smoke\":$smoke,"
  echo " \"quiet_load\":$QUIET_LOAD,\"quiet_max\":$QUIET_MAX,\"quiet_budget\":$QUIET_BUDGET}"
} >"$out/meta.json"
for r in $(seq 1 "$rounds"); do
  measure_append "$r"
  measure_fanout "$r"
done
node bench/client_report.mjs "$out" >"$out/client.md" || { echo "client.sh: the report did not render" >&2; exit 1; }
[ "$record" -eq 1 ] && cp "$out/client.md" bench/client.md
failed=$(find "$out" -maxdepth 1 -name '*.failed' | wc -l)
echo "client.sh: $((rounds * 2 - failed)) of $((rounds * 2)) runs passed their checks; results in $out"
[ "$failed" -eq 0 ]
