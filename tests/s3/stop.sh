#!/usr/bin/env bash
# Stops the S3 test endpoint tests/s3/start.sh DIR started: the processes
# named by DIR/proxy.pid and DIR/s3rver.pid (SIGTERM, then SIGKILL after
# 5 s). Leaves DIR itself to the caller.
#
# usage: tests/s3/stop.sh DIR
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
for name in proxy s3rver; do
  pidfile="$1/$name.pid"
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
done
