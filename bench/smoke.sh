#!/usr/bin/env bash
# Smoke test of the benchmark tools (not a speed test): starts runnel from
# BUILD_DIR, runs every runnel-bench scenario for about a second at tiny
# sizes (bootstrap in both modes, the bootstrap mode also with events after
# the snapshot and with an answer past the server's 8 MiB cap, so that the
# partial form and its follow-up reads are exercised), and the three
# micro-benchmarks briefly. A case passes when the tool
# exits 0 and the figure that proves work was done is non-zero. Then the
# client benchmark in its short form (bench/client.sh --smoke): it passes
# when the stream holds exactly what `runnel append --producer` read and
# every `runnel tail -f` printed exactly the payloads sent; no speed is
# asserted. Last, the pictures of docs/bench drawn from BENCHMARKS.md into
# a scratch directory (bench/plots.mjs, gnuplot).
# Usage: bench/smoke.sh BUILD_DIR        Ends with "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
build=${1:-build}
bench="$build/bench/runnel-bench"
data=$(mktemp -d)
log=$(mktemp)
out=$(mktemp)
port=$(free_port)
passed=0
failed=0

# tally NAME PASSED WHY: counts a case; a failure prints WHY and the case's
# output ($out).
tally() {
  if [ "$2" = yes ]; then
    passed=$((passed + 1))
    echo "ok   $1"
  else
    failed=$((failed + 1))
    echo "FAIL $1 ($3)"
    sed 's/^/     /' "$out" | head -30
  fi
}

# check NAME KEY CMD...: runs CMD (JSON on stdout); passes when it exits 0
# and the JSON has "KEY":<non-zero number>.
check() {
  local name=$1 key=$2 ok=no
  shift 2
  timeout 120 "$@" >"$out" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] && grep -qE "\"$key\":[1-9]" "$out" && ok=yes
  tally "$name" "$ok" "exit $rc, expected non-zero $key"
}

start_server "$build/runnel" "$data" "$port" "$log" --long-poll-timeout-ms 2000 || exit 1
base="http://127.0.0.1:$port"
pid=$SERVER_PID
check writes appends "$bench" writes --base "$base" --streams 4 --duration 1 --json
check writes-paced appends "$bench" writes --base "$base" --streams 4 --rate 200 --duration 1 --json
check writes-json appends "$bench" writes --base "$base" --streams 2 --duration 1 \
  --content-type application/json --payload 64 --json
check fanout delivered "$bench" fanout --base "$base" --subscribers 5 --rate 50 --duration 1 --json
check catchup many_requests "$bench" catchup --base "$base" --bytes 8M --append-bytes 1M \
  --clients 2 --json
check longpoll wakes "$bench" longpoll --base "$base" --readers 20 --streams 4 --rate 50 \
  --duration 1 --server-pid "$pid" --json
check bootstrap replay_bytes "$bench" bootstrap --base "$base" --clients 4 --events 50 \
  --event-bytes 100 --json
check bootstrap-mode complete_answers "$bench" bootstrap --mode bootstrap --surface bucket \
  --base "$base" --clients 4 --events 50 --event-bytes 1K --snapshot-bytes 64K --json
check bootstrap-mode-after complete_answers "$bench" bootstrap --mode bootstrap --surface bucket \
  --base "$base" --clients 3 --events 10 --event-bytes 1K --snapshot-bytes 1K --after-events 20 \
  --json
check bootstrap-mode-partial follow_up_bytes "$bench" bootstrap --mode bootstrap --surface bucket \
  --base "$base" --clients 1 --events 1 --event-bytes 64K --snapshot-bytes 1K --after-events 130 \
  --batch 16 --json
check create creates_per_s "$bench" create --base "$base" --surface bucket --streams 200 \
  --clients 8 --server-pid "$pid" --json
check fill fill_mb_per_s "$bench" fill --base "$base" --streams 3 --bytes 3M --append-bytes 256K \
  --run-id smoke --json
check replay streams_read_whole "$bench" replay --base "$base" --streams 3 --run-id smoke \
  --duration 5 --json
check micro-json mb_per_s "$build/bench/runnel-micro-json" --seconds 0.2 --json
check micro-blake3 1m_mb_per_s "$build/bench/runnel-micro-blake3" --seconds 0.05 --json
check micro-wal records "$build/bench/runnel-micro-wal" --dir "$data" --concurrency 8 \
  --seconds 0.5 --json
stop_server "$log" || { echo "FAIL server did not shut down cleanly"; failed=$((failed + 1)); }
client_out=$(mktemp -d)
timeout 300 bench/client.sh --smoke --bin "$build" --out "$client_out" >"$out" 2>&1
rc=$?
tally "client (append --producer, tail -f: bytes exact)" "$([ "$rc" -eq 0 ] && echo yes)" \
  "bench/client.sh --smoke exited $rc"
plots_out=$(mktemp -d)
RUNNEL_PLOTS_OUT=$plots_out node bench/plots.mjs headline BENCHMARKS.md >"$out" 2>&1
rc=$?
tally "plots (bench/plots.mjs headline: both pictures drawn)" \
  "$([ "$rc" -eq 0 ] && grep -q '<svg' "$plots_out/writes.svg" && grep -q '<svg' "$plots_out/reads.svg" && echo yes)" \
  "bench/plots.mjs exited $rc: $(tail -3 "$out")"
rm -rf "$data" "$log" "$out" "$client_out" "$plots_out"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
