#!/usr/bin/env bash
# Runs the official Durable Streams conformance suite against a freshly
# started server. Usage: scripts/conformance.sh BUILD_DIR
# Exclusions are decided in tests/conformance/vitest.config.mjs only.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
build=${1:-build}
data=$(mktemp -d)
log=$(mktemp)
port=$(free_port)
LONG_POLL_MS=1000
# --webhook-allow-loopback: the subscription tests' webhook receivers listen
# on 127.0.0.1.
start_server "$build/runnel" "$data" "$port" "$log" --long-poll-timeout-ms "$LONG_POLL_MS" \
  --webhook-allow-loopback || exit 1
(cd tests/conformance &&
  NO_COLOR=1 RUNNEL_URL="http://127.0.0.1:$port" RUNNEL_LONG_POLL_TIMEOUT_MS=$LONG_POLL_MS \
    npx vitest run)
rc=$?
stop_server "$log" || { echo "conformance: server did not shut down cleanly"; rc=1; }
rm -rf "$data" "$log"
exit $rc
