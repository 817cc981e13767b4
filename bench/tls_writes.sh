#!/usr/bin/env bash
# Writes over TLS against cleartext (issue 17: TLS >= 80 % of cleartext):
# 500 streams x 256 B appends from 500 HTTP/1.1 connections, one request in
# flight each, measured with h2load (nghttp2-client) as the outside load
# generator, since runnel-bench speaks cleartext only. Runs are alternated
# (cleartext, TLS, ...) so that machine load falls on both alike; each run
# has a fresh server and data directory; the 1-minute load average before
# each run is printed with its figures, and the server's CPU time per
# 1,000 appends, which a busy machine distorts less than throughput: over
# the whole run (user + system, warm-up and so the handshakes included,
# per append h2load counted), and in the steady state (from 2 s after the
# load started to SECONDS after, per append the server counted in
# runnel_appends_total: no handshake in it).
# Usage: [PERF_DATA=PREFIX] bench/tls_writes.sh BIN [ROUNDS] [SECONDS]
# (SECONDS at least 4). With PERF_DATA, `perf record -g` samples the server
# through each run into PREFIX.MODE.ROUND.
# Prints one line per run: mode, appends/s, p50/p99 latency (ms) from
# h2load's per-request log, failed requests, server CPU ms per 1,000
# appends (whole run, steady state), load.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
bin=${1:?usage: bench/tls_writes.sh BIN [ROUNDS] [SECONDS]}
rounds=${2:-3}
seconds=${3:-8}
[ "$seconds" -ge 4 ] || { echo "SECONDS must be at least 4"; exit 1; }
streams=500
command -v h2load >/dev/null || { echo "h2load not found (apt-get install nghttp2-client)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tests/lib/test_pki.sh "$work/pki" || exit 1
head -c 256 /dev/zero | tr '\0' 'x' >"$work/payload"

# cpu_ticks: the server's user + system time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$SERVER_PID/stat"; }

# appends BASE_URL: the server's runnel_appends_total.
appends() {
  curl -sS --cacert "$work/pki/ca.pem" "$1/__runnel/metrics" | awk '$1 == "runnel_appends_total" { print $2 }'
}

# run MODE: one measured run against a fresh server.
run() {
  local mode=$1 scheme=http flags=() port
  port=$(free_port)
  unset SERVER_CA
  if [ "$mode" = tls ]; then
    scheme=https flags=(--tls-cert "$work/pki/server.pem" --tls-key "$work/pki/server.key")
    export SERVER_CA=$work/pki/ca.pem
  fi
  rm -rf "$work/data" && mkdir "$work/data"
  start_server "$bin" "$work/data" "$port" "$work/log" "${flags[@]}" || return 1
  local base="$scheme://127.0.0.1:$port"
  : >"$work/uris"
  for i in $(seq 1 $streams); do echo "$base/v1/stream/bench/s$i" >>"$work/uris"; done
  # the streams, created over one connection
  xargs -a "$work/uris" curl -sS --cacert "$work/pki/ca.pem" -o /dev/null -X PUT \
    -H 'content-type: text/plain' || return 1
  local load cpu0 cpu1 tick h2pid perfpid="" steady_a steady_b
  load=$(cut -d' ' -f1 /proc/loadavg)
  tick=$(getconf CLK_TCK)
  if [ -n "${PERF_DATA:-}" ]; then
    perf record -q -g -p "$SERVER_PID" -o "$PERF_DATA.$mode.$round" >/dev/null 2>&1 &
    perfpid=$!
  fi
  cpu0=$(cpu_ticks)
  h2load --h1 -c $streams -m 1 -t 1 -D "$seconds" --warm-up-time 1 -d "$work/payload" \
    -H 'content-type: text/plain' -i "$work/uris" --log-file "$work/h2log" >"$work/out" 2>&1 &
  h2pid=$!
  sleep 2
  steady_a="$(cpu_ticks) $(appends "$base")"
  sleep $((seconds - 2))
  steady_b="$(cpu_ticks) $(appends "$base")"
  wait "$h2pid"
  cpu1=$(cpu_ticks)
  [ -n "$perfpid" ] && kill -INT "$perfpid" && wait "$perfpid"
  stop_server "$work/log" >/dev/null || true
  local rps failed done cpu_ms steady_ms
  done=$(grep -oE '[0-9]+ succeeded' "$work/out" | head -1 | cut -d' ' -f1)
  cpu_ms=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$tick" -v n="${done:-0}" \
    'BEGIN { printf "%.1f", n ? (b - a) * 1000 / t / n * 1000 : 0 }')
  steady_ms=$(echo "$steady_a $steady_b" | awk -v t="$tick" \
    '{ n = $4 - $2; printf "%.1f", (n > 0 ? ($3 - $1) * 1000 / t / n * 1000 : 0) }')
  rps=$(grep -oE 'finished in [^,]+, [0-9.]+ req/s' "$work/out" | grep -oE '[0-9.]+ req/s' | cut -d' ' -f1)
  failed=$(grep -oE '[0-9]+ failed' "$work/out" | head -1 | cut -d' ' -f1)
  # h2load's log: start time, status, elapsed microseconds
  sort -n -k3 "$work/h2log" | awk -v mode="$mode" -v rps="$rps" -v failed="$failed" -v load="$load" \
    -v cpu="$cpu_ms" -v steady="$steady_ms" '
    { v[NR] = $3 } END {
      printf "%-9s %8.0f appends/s  p50 %7.2f ms  p99 %7.2f ms  failed %s  cpu %s ms/1k (steady %s)  load %s\n",
        mode, rps, v[int(NR * 0.5)] / 1000, v[int(NR * 0.99)] / 1000, failed, cpu, steady, load }'
}

for round in $(seq 1 "$rounds"); do
  run cleartext
  run tls
done
