# Shared helpers for the test scripts (sourced, not run).

# Prints a TCP port free on 127.0.0.1 (tests/lib/server.mjs's freePort:
# below the kernel's ephemeral range, so no outgoing connection takes it
# before the server binds it).
free_port() {
  local lib
  lib="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/lib/server.mjs"
  node --input-type=module -e "import { freePort } from '$lib'; console.log(await freePort())"
}

# start_server BIN DATA_DIR PORT LOG [extra serve flags...]: starts runnel in
# the background, sets SERVER_PID, and waits (10 s at most) until it is ready
# (/__runnel/readyz answers 200: recovery finished). With SERVER_CA set (a
# CA file) the server is asked over https, trusting that CA.
start_server() {
  local bin=$1 data=$2 port=$3 log=$4 scheme=http tls=()
  shift 4
  if [ -n "${SERVER_CA:-}" ]; then scheme=https tls=(--cacert "$SERVER_CA"); fi
  "$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" "$@" >"$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    if [ "$(curl -s "${tls[@]}" -o /dev/null -w '%{http_code}' "$scheme://127.0.0.1:$port/__runnel/readyz" 2>/dev/null)" = 200 ]; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "server exited early:"; cat "$log"; return 1; }
    sleep 0.1
  done
  echo "server did not answer within 10 s"; cat "$log"; return 1
}

# stop_server LOG: SIGTERM, expect exit 0 within 15 s and no sanitizer report.
stop_server() {
  local log=$1 rc=0
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 1 150); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "server did not stop within 15 s of SIGTERM"; kill -KILL "$SERVER_PID"; rc=1
  fi
  wait "$SERVER_PID" || rc=$?
  if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$log"; then
    echo "sanitizer report in server log:"; grep -A30 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$log" | head -60; rc=1
  fi
  return "$rc"
}

# build_bench_bin DIR: builds build/ (scripts/build.sh plain, under nice: the
# machine is shared and the measuring is not done yet) and copies runnel and
# runnel-bench into DIR, so that a rebuild during the measurement cannot
# change what is measured. Returns non-zero when either step fails.
build_bench_bin() {
  local dir=$1
  nice -n 19 scripts/build.sh plain || return 1
  mkdir -p "$dir"
  cp build/runnel build/bench/runnel-bench "$dir/"
}
