#!/usr/bin/env bash
# Runs the official Durable Streams conformance suite with every request
# reaching the server over HTTP/2. The suite's client (Node's fetch,
# undici 6) speaks HTTP/2 only over TLS, so it talks HTTP/1.1 to nghttpx
# (Debian nghttp2-proxy), which forwards each request to the server over
# cleartext HTTP/2 (h2c by prior knowledge); the server's metrics must show
# HTTP/2 streams. Usage:
# scripts/conformance_h2.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
command -v nghttpx >/dev/null || { echo "conformance_h2: nghttpx missing (apt-get install nghttp2-proxy)" >&2; exit 1; }
build=${1:-build}
data=$(mktemp -d)
log=$(mktemp)
port=$(free_port)
proxy_port=$(free_port)
# --public-url: the URLs the server writes (Location, subscription links)
# name the proxy the suite talks to.
LONG_POLL_MS=1000
start_server "$build/runnel" "$data" "$port" "$log" --long-poll-timeout-ms "$LONG_POLL_MS" \
  --webhook-allow-loopback --public-url "http://127.0.0.1:$proxy_port" || exit 1
# No Via, the server's own Server header, no timeouts shorter than the
# suite's waits, one worker.
nghttpx --frontend="127.0.0.1,$proxy_port;no-tls" --backend="127.0.0.1,$port;;proto=h2" \
  -n1 --no-via --no-server-rewrite --no-ocsp \
  --frontend-read-timeout=5m --backend-read-timeout=5m --stream-read-timeout=5m \
  --log-level=WARN --errorlog-file=/dev/stderr --accesslog-file=/dev/null \
  --conf=/dev/null >"$log.proxy" 2>&1 &
proxy=$!
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$proxy_port/__runnel/livez" && break
  sleep 0.1
done
(cd tests/conformance &&
  NO_COLOR=1 RUNNEL_URL="http://127.0.0.1:$proxy_port" RUNNEL_LONG_POLL_TIMEOUT_MS=$LONG_POLL_MS \
    npx vitest run)
rc=$?
kill "$proxy"
wait "$proxy" 2>/dev/null
h2=$(curl -s "http://127.0.0.1:$port/__runnel/metrics" | awk '/^runnel_http2_streams_total/ {print $2}')
echo "conformance_h2: requests that reached the server over HTTP/2: ${h2:-0}"
[ "${h2:-0}" -gt 0 ] || rc=1
stop_server "$log" || { echo "conformance_h2: server did not shut down cleanly"; rc=1; }
tail -20 "$log.proxy"
rm -rf "$data" "$log" "$log.proxy"
exit $rc
