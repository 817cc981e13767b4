#!/usr/bin/env bash
# Capacity figures of issue 7 for Runnel (default settings, data on the root
# disk under /var/tmp), written as JSON into OUT (bench/compare_report.mjs
# renders them into BENCHMARKS.md):
#
#   idle.json     --streams idle streams (default 1,000,000) created with PUT
#                 on the bucket surface (runnel-bench create, 256 connections):
#                 the server's VmRSS / VmHWM / RssAnon from /proc/PID/status
#                 5 s after the last create, and again after a SIGKILL
#                 restart (the creates replayed from the log) and a SIGTERM
#                 restart (loaded from the final checkpoint)
#   restart-*.json  --data-bytes (default 1 GiB) stored in two shapes (one
#                 stream in 4 MiB appends; 1,000 streams in 16 KiB appends),
#                 then restarts timed from process start (just before exec)
#                 to the first 200 of /__runnel/readyz (polled every 10 ms):
#                 after SIGKILL (log replay since the last checkpoint; always
#                 the first recovery after that crash, one fill each) and
#                 after SIGTERM (final checkpoint), each with the data
#                 directory's pages in the page cache (warm) and evicted
#                 (cold: every file of the data directory fsync'ed and then
#                 dropped from the cache with POSIX_FADV_DONTNEED via
#                 `dd iflag=nocache`, which touches no other process's cache),
#                 with what the server read from storage (/proc/PID/io).
#                 After the restarts the stored bytes must still all be
#                 there (runnel_hot_bytes). A third fill is recovered under
#                 `strace -f -T` (restart-*-sigkill.strace.txt).
#
# Before each experiment the script waits for a quiet machine (bench/quiet.sh)
# and records the load average at its start and end.
# Usage: bench/capacity.sh [--bin DIR] [--out DIR] [--streams N] [--data-bytes SIZE]
#   --bin DIR   directory with runnel and runnel-bench (default: build, then
#               copied into OUT/bin)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/quiet.sh

bin=""
out=""
streams=1000000
data_bytes=1G
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --streams) streams=$2; shift 2 ;;
    --data-bytes) data_bytes=$2; shift 2 ;;
    *) echo "usage: bench/capacity.sh [--bin DIR] [--out DIR] [--streams N] [--data-bytes SIZE]" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out=$(mktemp -d /tmp/runnel-capacity.XXXXXX)
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -z "$bin" ]; then
  bin="$out/bin"
  build_bench_bin "$bin" || exit 1
fi
work=$(mktemp -d /var/tmp/runnel-capacity.XXXXXX)
trap 'rm -rf "$work"' EXIT
ulimit -n "$(ulimit -Hn)"
bytes=$(numfmt --from=iec "$data_bytes") || exit 2

SERVER_PID=""
PORT=""
T0=0
now_ns() { date +%s%N; }

# launch DATA LOG: starts runnel (default settings) on a new port; T0 is
# taken just before it.
launch() {
  local data=$1 log=$2
  PORT=$(free_port)
  T0=$(now_ns)
  "$bin/runnel" serve --listen "127.0.0.1:$PORT" --data-dir "$data" >>"$log" 2>&1 &
  SERVER_PID=$!
}

# until_ready: prints the milliseconds from T0 to the first readyz 200.
until_ready() {
  local deadline=$((SECONDS + 1800))
  while [ $SECONDS -lt $deadline ]; do
    if [ "$(curl -s -o /dev/null --max-time 1 -w '%{http_code}' "http://127.0.0.1:$PORT/__runnel/readyz")" = 200 ]; then
      echo $(( ($(now_ns) - T0) / 1000000 ))
      return 0
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || { echo -1; return 1; }
    sleep 0.01
  done
  echo -1
  return 1
}

# status_kib FIELD: a field of /proc/SERVER_PID/status in KiB.
status_kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$SERVER_PID/status"; }

# term_stop: SIGTERM; SHUT_MS = milliseconds until the process exited (a
# graceful stop writes the final checkpoint). Not in a subshell: it waits.
SHUT_MS=""
term_stop() {
  local t
  t=$(now_ns)
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null
  SHUT_MS=$(( ($(now_ns) - t) / 1000000 ))
}

kill_stop() {
  kill -KILL "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null
  return 0
}

# drop_cache DIR: writes back and evicts the page cache of DIR's files only.
drop_cache() {
  find "$1" -type f -exec sync {} + 2>/dev/null
  find "$1" -type f -exec sh -c 'for f; do dd if="$f" iflag=nocache count=0 status=none; done' _ {} +
}

# cached_kib DIR: how much of DIR's files is in the page cache (fincore).
cached_kib() {
  find "$1" -type f -print0 | xargs -0 -r fincore -b -n -o RES 2>/dev/null |
    awk '{ s += $1 } END { printf "%d", s / 1024 }'
}

files() { find "$1" -type f | wc -l; }

# profile_restart DATA LOG OUT: one more (untimed) restart under
# `strace -f -T`, stopped with SIGKILL once ready; OUT gets its syscalls by
# total time (calls, seconds, µs per call). Recovery does not checkpoint, so
# after a SIGKILL this replays the same log as the timed restart did.
profile_restart() {
  local data=$1 log=$2 txt=$3 raw="$3.raw"
  PORT=$(free_port)
  T0=$(now_ns)
  strace -f -T -qq -o "$raw" "$bin/runnel" serve --listen "127.0.0.1:$PORT" --data-dir "$data" \
    >>"$log" 2>&1 &
  local spid=$!
  SERVER_PID=$spid
  local ms
  ms=$(until_ready)
  local rpid
  rpid=$(pgrep -P "$spid" | head -1)
  [ -n "$rpid" ] && kill -KILL "$rpid"
  wait "$spid" 2>/dev/null
  {
    echo "restart under strace -f -T: ready after $ms ms; $(recovery_line "$log")"
    echo "syscalls by total time (all threads):"
    perl -ne 'if (/^\d+\s+([a-z_0-9]+)\(.*<([0-9.]+)>$/) { $t{$1} += $2; $c{$1}++ }
      END { for $k (sort { $t{$b} <=> $t{$a} } keys %t) {
        printf "%-14s %9d calls %9.3f s %9.1f us/call\n", $k, $c{$k}, $t{$k}, 1e6 * $t{$k} / $c{$k} } }' \
      "$raw" | grep -v -E '^(futex|epoll_wait|epoll_pwait|accept4|poll|wait4|rt_sigtimedwait) ' | head -12
  } >"$txt"
  rm -f "$raw"
}

recovery_line() { grep -o 'recovered [0-9]* streams.*' "$1" | tail -1 | sed 's/"/\\"/g'; }

metric() { curl -s --max-time 10 "http://127.0.0.1:$PORT/__runnel/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# read_kib: KiB the server read from storage so far (/proc/PID/io read_bytes).
read_kib() { awk '$1 == "read_bytes:" { printf "%d", $2 / 1024 }' "/proc/$SERVER_PID/io"; }

# ---- 1. idle streams ------------------------------------------------------------
idle() {
  local data="$work/idle" log="$out/idle.server.log" tag="$out/idle"
  local files_created files_recovered
  mkdir -p "$data"
  run_begin "$tag"
  launch "$data" "$log"
  until_ready >/dev/null || { echo "capacity: runnel did not start"; cat "$log"; return 1; }
  local rss_empty
  rss_empty=$(status_kib VmRSS)
  echo "capacity: creating $streams idle streams"
  "$bin/runnel-bench" create --streams "$streams" --clients 256 --surface bucket \
    --base "http://127.0.0.1:$PORT" --server-pid "$SERVER_PID" --timeout 3600 --json \
    >"$out/idle-create.json" 2>"$out/idle-create.txt"
  local rc=$?
  sleep 5
  local rss hwm anon count
  rss=$(status_kib VmRSS); hwm=$(status_kib VmHWM); anon=$(status_kib RssAnon)
  count=$(metric runnel_streams)
  kill_stop
  files_created=$(files "$data")
  launch "$data" "$log"
  local kill_ms kill_rss kill_line
  kill_ms=$(until_ready)
  local kill_read
  kill_read=$(read_kib)
  sleep 2
  kill_rss=$(status_kib VmRSS)
  kill_line=$(recovery_line "$log")
  local shut_ms term_ms term_rss term_line term_count
  files_recovered=$(files "$data")
  term_stop
  shut_ms=$SHUT_MS
  launch "$data" "$log"
  term_ms=$(until_ready)
  sleep 2
  term_rss=$(status_kib VmRSS)
  term_line=$(recovery_line "$log")
  term_count=$(metric runnel_streams)
  term_stop
  run_end "$tag"
  cat >"$out/idle.json" <<EOF
{"streams": $streams, "create_exit": $rc, "streams_gauge": ${count:-null},
 "rss_empty_kib": ${rss_empty:-null}, "rss_kib": ${rss:-null}, "hwm_kib": ${hwm:-null}, "rss_anon_kib": ${anon:-null},
 "sigkill_ready_ms": ${kill_ms:-null}, "sigkill_read_kib": ${kill_read:-null}, "sigkill_rss_kib": ${kill_rss:-null}, "sigkill_recovery": "$kill_line",
 "shutdown_ms": ${shut_ms:-null}, "sigterm_ready_ms": ${term_ms:-null}, "sigterm_rss_kib": ${term_rss:-null},
 "sigterm_recovery": "$term_line", "streams_after_restarts": ${term_count:-null},
 "files_after_create": $files_created, "files_after_sigkill_recovery": $files_recovered,
 "data_dir_kib": $(du -sk "$data" | cut -f1)}
EOF
  rm -rf "$data"
  echo "capacity: idle streams done: RSS $((rss / 1024)) MiB for $count streams"
}

# ---- 2. restart with stored data ------------------------------------------------
# fill_and_kill NAME N APPEND DATA LOG: a fresh server on DATA stores
# --data-bytes in N streams, then is killed with SIGKILL (sets FILL_RC, STORED).
fill_and_kill() {
  local name=$1 n=$2 append=$3 data=$4 log=$5
  rm -rf "$data"
  mkdir -p "$data"
  launch "$data" "$log"
  until_ready >/dev/null || { echo "capacity: runnel did not start"; cat "$log"; return 1; }
  "$bin/runnel-bench" fill --streams "$n" --bytes "$bytes" --append-bytes "$append" \
    --base "http://127.0.0.1:$PORT" --timeout 1800 --json >"$out/restart-$name-fill.json" \
    2>"$out/restart-$name-fill.txt"
  FILL_RC=$?
  STORED=$(metric runnel_hot_bytes)
  kill_stop
}

# timed_restart DATA LOG: starts the server on DATA, times it to ready and
# stops it with SIGTERM, leaving READY_MS, RECOVERY (the server's recovery
# line), READ_KIB (read from storage until ready), STORED_AFTER
# (runnel_hot_bytes) and SHUT_MS.
timed_restart() {
  launch "$1" "$2"
  READY_MS=$(until_ready)
  RECOVERY=$(recovery_line "$2")
  READ_KIB=$(read_kib)
  STORED_AFTER=$(metric runnel_hot_bytes)
  term_stop
}

# restart NAME STREAMS APPEND_BYTES. Every SIGKILL figure is the first
# recovery after the crash (a repeat would find the stream files already
# cut to the recovered tail), so each needs its own fill: (A) SIGKILL, warm
# restart, then the SIGTERM restarts; (B) SIGKILL, pages evicted, cold
# restart; (C) SIGKILL, restart under strace (not timed).
restart() {
  local name=$1 n=$2 append
  append=$(numfmt --from=iec "$3")
  local data="$work/$name" log="$out/restart-$name.server.log" tag="$out/restart-$name"
  run_begin "$tag"
  echo "capacity: storing $data_bytes in $n stream(s) ($name), 3 times"
  # (A)
  fill_and_kill "$name" "$n" "$append" "$data" "$log" || return 1
  local rc=$FILL_RC stored=$STORED du_kib
  du_kib=$(du -sk "$data" | cut -f1)
  timed_restart "$data" "$log"
  local kill_warm=$READY_MS kill_warm_line=$RECOVERY kill_warm_read=$READ_KIB
  local shut_ms=$SHUT_MS
  timed_restart "$data" "$log"
  local term_warm=$READY_MS term_warm_line=$RECOVERY
  drop_cache "$data"
  timed_restart "$data" "$log"
  local term_cold=$READY_MS term_cold_line=$RECOVERY term_cold_read=$READ_KIB after=$STORED_AFTER
  # (B)
  fill_and_kill "$name" "$n" "$append" "$data" "$log" || return 1
  drop_cache "$data"
  local cold_cached
  cold_cached=$(cached_kib "$data")
  timed_restart "$data" "$log"
  local kill_cold=$READY_MS kill_cold_line=$RECOVERY kill_cold_read=$READ_KIB after_cold=$STORED_AFTER
  run_end "$tag"
  # (C)
  fill_and_kill "$name" "$n" "$append" "$data" "$log" || return 1
  profile_restart "$data" "$log" "$out/restart-$name-sigkill.strace.txt"
  cat >"$out/restart-$name.json" <<EOF
{"name": "$name", "streams": $n, "append_bytes": $append, "bytes": $bytes, "fill_exit": $rc,
 "stored_bytes": ${stored:-null}, "stored_bytes_after_restarts": ${after:-null},
 "stored_bytes_after_cold_sigkill": ${after_cold:-null}, "data_dir_kib": $du_kib,
 "cached_kib_after_drop": ${cold_cached:-null},
 "sigkill_warm_ready_ms": ${kill_warm:-null}, "sigkill_warm_recovery": "$kill_warm_line", "sigkill_warm_read_kib": ${kill_warm_read:-null},
 "sigkill_cold_ready_ms": ${kill_cold:-null}, "sigkill_cold_recovery": "$kill_cold_line", "sigkill_cold_read_kib": ${kill_cold_read:-null},
 "shutdown_ms": ${shut_ms:-null},
 "sigterm_warm_ready_ms": ${term_warm:-null}, "sigterm_warm_recovery": "$term_warm_line",
 "sigterm_cold_ready_ms": ${term_cold:-null}, "sigterm_cold_recovery": "$term_cold_line", "sigterm_cold_read_kib": ${term_cold_read:-null}}
EOF
  rm -rf "$data"
  echo "capacity: restart $name done: SIGKILL ${kill_warm}/${kill_cold} ms (warm/cold), SIGTERM ${term_warm}/${term_cold} ms"
}

# A small idle-stream recovery under strace (a million would take long).
idle_profile() {
  local data="$work/idle-profile" log="$out/idle-profile.server.log"
  mkdir -p "$data"
  launch "$data" "$log"
  until_ready >/dev/null || return 1
  "$bin/runnel-bench" create --streams 20000 --clients 256 --surface bucket \
    --base "http://127.0.0.1:$PORT" --json >/dev/null 2>&1
  kill_stop
  profile_restart "$data" "$log" "$out/idle-20k-sigkill.strace.txt"
  rm -rf "$data"
}

idle
idle_profile
restart 1x1g 1 4M
restart 1000x1m 1000 16K
echo "capacity: results in $out"
