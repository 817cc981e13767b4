#!/usr/bin/env bash
# History tiering figures (BENCHMARKS.md, issue 16's targets), against the
# S3 test endpoint's s3rver (tests/s3/start.sh), which Runnel and curl both
# reach directly (no verifying proxy), in the same run:
#  - catch-up from the cold tier: a 64 MiB stream whose 16 chunks are S3
#    objects, read from offset 0 by catch-up reads (8 MiB each, the bucket
#    surface's read size) right after a restart (an empty read cache: every
#    chunk is a GET), against curl reading the same 16 objects in 4 MiB
#    ranges, one at a time, from the same s3rver. The catch-up is read two
#    ways: by one curl process on one connection, as curl reads the objects
#    (each answer's Stream-Next-Offset checked to be the next read's
#    offset), and by one curl process per read following
#    Stream-Next-Offset in the shell (the method of the first figures,
#    which also counts a process start per read);
#  - appends of 64 KiB at a fixed rate (8 streams, runnel-bench writes)
#    with history moving to the cold store as it comes (--hot-bytes) against
#    the same server without tiering: appends/s and p50/p99 latency.
# Each round measures every configuration once (interleaved).
#
# usage: bench/history_tier.sh [BUILD_DIR] [ROUNDS] [RATE]  (defaults: build, 3, 400)
# HISTORY_TIER_WRITES=0 measures the catch-up figures only.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
rate=${3:-400}
bin=$build/runnel
bench=$build/bench/runnel-bench
[ -x "$bin" ] && [ -x "$bench" ] || { echo "history_tier.sh: build $bin and $bench first" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/runnel-hist-bench-XXXXXX")
pid=
cleanup() {
  [ -z "$pid" ] || { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  tests/s3/stop.sh "$dir"
  rm -rf "$dir"
}
trap cleanup EXIT
tests/s3/start.sh "$dir" >/dev/null
set -a
. "$dir/env"
set +a
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER # s3rver's own key: no proxy
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port
s3=(--cold-store=s3 --s3-endpoint "$S3_UPSTREAM" --s3-bucket "$S3_BUCKET")

start_server() { # DATA_DIR ARGS...
  local data=$1
  shift
  "$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" "$@" >>"$dir/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    curl -sf "$base/__runnel/readyz" >/dev/null && return
    sleep 0.1
  done
  echo "history_tier.sh: the server did not get ready" >&2
  tail -20 "$dir/server.log" >&2
  exit 1
}
stop_server() {
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
}
metric() { curl -s "$base/__runnel/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
tok() { printf '0000000000000000_%016d' "$1"; }
now() { date +%s.%N; }
rate_of() { echo "$1 $2 $3" | awk '{printf "%.1f", $1 / ($3 - $2)}'; } # MIB T0 T1

# ---- the cold stream
mib=64
head -c $((2 << 20)) /dev/urandom >"$dir/piece"
start_server "$dir/cold" "${s3[@]}" --s3-prefix catchup/ --hot-bytes $((256 << 20))
curl -sf -X PUT -H 'content-type: application/octet-stream' "$base/bench/s" >/dev/null
for _ in $(seq $((mib / 2))); do
  curl -sf -X POST -H 'content-type: application/octet-stream' --data-binary @"$dir/piece" "$base/bench/s" >/dev/null
done
for _ in $(seq 600); do
  [ "$(metric runnel_history_cold_bytes)" = $((mib << 20)) ] && [ "$(metric runnel_history_flush_lag_bytes)" = 0 ] && break
  sleep 0.1
done
[ "$(metric runnel_history_cold_bytes)" = $((mib << 20)) ] || { echo "history_tier.sh: the flush did not finish" >&2; exit 1; }
stop_server
objects=$(cd "$dir/data/$S3_BUCKET" && find catchup/history -name '*._S3rver_object' | sed 's/._S3rver_object$//' | sort)

catchup_one() { # one pass from offset 0 after a restart, one curl process; prints MiB/s
  start_server "$dir/cold" "${s3[@]}" --s3-prefix catchup/ --hot-bytes $((256 << 20))
  local args=() expect="" got off t0 t1
  for ((off = 0; off < mib << 20; off += 8 << 20)); do
    [ "$off" -eq 0 ] || args+=(--next)
    args+=(-sf -o /dev/null -w '%header{stream-next-offset}\n' "$base/bench/s?offset=$(tok "$off")")
    expect+="$(tok $((off + (8 << 20))))"$'\n'
  done
  t0=$(now)
  got=$(curl "${args[@]}")
  t1=$(now)
  stop_server
  [ "$got"$'\n' = "$expect" ] || { echo "history_tier.sh: the catch-up reads answered other offsets: $got" >&2; exit 1; }
  rate_of "$mib" "$t0" "$t1"
}

catchup() { # one pass from offset 0 after a restart, one curl per read; prints MiB/s
  start_server "$dir/cold" "${s3[@]}" --s3-prefix catchup/ --hot-bytes $((256 << 20))
  local off=0 t0 t1 next
  t0=$(now)
  while [ "$off" -lt $((mib << 20)) ]; do
    next=$(curl -sf -D - -o /dev/null "$base/bench/s?offset=$(tok "$off")" | tr -d '\r' |
      awk -F': ' 'tolower($1) == "stream-next-offset" {print $2}')
    [ -n "$next" ] || { echo "history_tier.sh: a catch-up read failed at $off" >&2; exit 1; }
    off=$((10#${next#*_}))
  done
  t1=$(now)
  stop_server
  rate_of "$mib" "$t0" "$t1"
}

curl_gets() { # the same objects, 4 MiB ranges, one at a time; prints MiB/s
  local args=() first=1 k t0 t1
  for k in $objects; do
    [ $first -eq 1 ] || args+=(--next)
    first=0
    args+=(-s -o /dev/null -r "0-$(((4 << 20) - 1))" "$S3_UPSTREAM/$S3_BUCKET/$k")
  done
  t0=$(now)
  curl "${args[@]}"
  t1=$(now)
  rate_of "$mib" "$t0" "$t1"
}

writes() { # NAME ARGS...: appends/s, p50 and p99 (us) of paced 64 KiB appends
  local name=$1 data=w-$1-$RANDOM
  shift
  # a new data directory is a new deployment: a prefix of its own
  start_server "$dir/$data" "${s3[@]}" --s3-prefix "$data/" "$@"
  "$bench" writes --streams 8 --payload 65536 --rate "$rate" --duration 15 --base "$base" \
    --content-type application/octet-stream --json 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); l=r["append_latency"]; print("%.0f %d %d" % (r["appends_per_s"], l["p50_us"], l["p99_us"]))'
  echo "flushed $(metric runnel_history_flushed_bytes_total) bytes" >>"$dir/server.log"
  stop_server
}

declare -A res
add() { res[$1]="${res[$1]:-} $2"; }
for _ in $(seq "$rounds"); do
  add "catch-up, one curl process (MiB/s)" "$(catchup_one)"
  add "catch-up, one curl per read (MiB/s)" "$(catchup)"
  add "curl ranged GETs, same objects (MiB/s)" "$(curl_gets)"
  [ "${HISTORY_TIER_WRITES:-1}" != 0 ] || continue
  read -r a p50 p99 <<<"$(writes local)"
  add "local only: appends/s" "$a"; add "local only: p50 us" "$p50"; add "local only: p99 us" "$p99"
  read -r a p50 p99 <<<"$(writes tiered --hot-bytes $((256 << 20)))"
  add "tiering: appends/s" "$a"; add "tiering: p50 us" "$p50"; add "tiering: p99 us" "$p99"
done
printf '%-42s %10s %s\n' "figure" median "all runs"
for k in "catch-up, one curl process (MiB/s)" "catch-up, one curl per read (MiB/s)" \
  "curl ranged GETs, same objects (MiB/s)" \
  "local only: appends/s" "tiering: appends/s" "local only: p50 us" "tiering: p50 us" \
  "local only: p99 us" "tiering: p99 us"; do
  [ -n "${res[$k]:-}" ] || continue
  echo "${res[$k]}" | tr ' ' '\n' | grep . | sort -n |
    awk -v label="$k" '{v[NR] = $1; all = all " " $1} END {
      m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%-42s %10.1f %s\n", label, m, all}'
done
grep -h "^flushed" "$dir/server.log" | sed 's/^/# /' || true
