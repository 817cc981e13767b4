#!/usr/bin/env bash
# Runs the official Durable Streams conformance suite through the gate, with
# one tenant of full rights: a standalone `runnel gateway` in front of a
# fresh node (the node's --public-url is the gateway's, so the URLs the
# node hands out lead through it), or with --embedded one node started with
# --tenants. The suite sends no credential: a Node preload
# (tests/gateway/conformance_auth.mjs, through NODE_OPTIONS=--import) adds
# the tenant's key to every fetch to the gate's origin.
# Usage: scripts/conformance_gateway.sh BUILD_DIR [--embedded]
# Exclusions are decided in tests/conformance/vitest.config.mjs only.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
build=${1:-build}
embedded=0
[ "${2:-}" = --embedded ] && embedded=1
dir=$(mktemp -d)
LONG_POLL_MS=1000
GATEWAY_PID=
cleanup() {
  [ -n "$GATEWAY_PID" ] && kill -KILL "$GATEWAY_PID" 2>/dev/null
  [ -n "${SERVER_PID:-}" ] && kill -KILL "$SERVER_PID" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

# the tenant: a key made here, stored as its SHA-256
key=rnk_$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
sha=$(printf %s "$key" | sha256sum | cut -d' ' -f1)
printf '{"tenants":{"conformance":{"keys":[{"id":"k1","sha256":"%s"}],"rights":{"*":"rwa"}}}}\n' "$sha" >"$dir/tenants.json"

gate_port=$(free_port)
gate=http://127.0.0.1:$gate_port
# --webhook-allow-loopback: the subscription tests' webhook receivers listen on 127.0.0.1.
node_flags=(--long-poll-timeout-ms "$LONG_POLL_MS" --webhook-allow-loopback)
if [ "$embedded" -eq 1 ]; then
  start_server "$build/runnel" "$dir/data" "$gate_port" "$dir/node.log" "${node_flags[@]}" \
    --tenants "$dir/tenants.json" || exit 1
else
  node_port=$(free_port)
  start_server "$build/runnel" "$dir/data" "$node_port" "$dir/node.log" "${node_flags[@]}" \
    --public-url "$gate" || exit 1
  "$build/runnel" gateway --listen "127.0.0.1:$gate_port" --upstream "http://127.0.0.1:$node_port" \
    --tenants "$dir/tenants.json" >"$dir/gateway.log" 2>&1 &
  GATEWAY_PID=$!
  ready=0
  for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$gate/__runnel/readyz")" = 200 ] && { ready=1; break; }
    kill -0 "$GATEWAY_PID" 2>/dev/null || { echo "the gateway exited early:"; cat "$dir/gateway.log"; exit 1; }
    sleep 0.1
  done
  [ "$ready" -eq 1 ] || { echo "the gateway was not ready within 10 s:"; cat "$dir/gateway.log"; exit 1; }
fi
echo "conformance through the $([ "$embedded" -eq 1 ] && echo embedded gate || echo standalone gateway): $gate"
(cd tests/conformance &&
  NO_COLOR=1 RUNNEL_URL="$gate" RUNNEL_LONG_POLL_TIMEOUT_MS=$LONG_POLL_MS \
    GATE_AUTH_ORIGIN="$gate" GATE_AUTH_KEY="$key" \
    NODE_OPTIONS="--import $PWD/../gateway/conformance_auth.mjs" npx vitest run)
rc=$?
if [ -n "$GATEWAY_PID" ]; then
  kill -TERM "$GATEWAY_PID"
  for _ in $(seq 1 150); do kill -0 "$GATEWAY_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$GATEWAY_PID" 2>/dev/null; then echo "the gateway did not stop within 15 s of SIGTERM"; rc=1; fi
  kill -KILL "$GATEWAY_PID" 2>/dev/null
  wait "$GATEWAY_PID" || { echo "the gateway did not exit cleanly on SIGTERM"; rc=1; }
  GATEWAY_PID=
  if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$dir/gateway.log"; then
    echo "sanitizer report in the gateway's log:"; grep -A30 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$dir/gateway.log" | head -60
    rc=1
  fi
fi
stop_server "$dir/node.log" || { echo "conformance: the node did not shut down cleanly"; rc=1; }
SERVER_PID=
if grep -q "$key" "$dir"/*.log; then echo "the key appears in a log"; rc=1; fi
exit $rc
