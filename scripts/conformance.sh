#!/usr/bin/env bash
# Runs the official Durable Streams conformance suite against a freshly
# started server. Usage: scripts/conformance.sh BUILD_DIR [--tls]
# --tls: the server speaks HTTPS with a certificate of a test CA made for
# the run (tests/lib/test_pki.sh), which the suite trusts through
# NODE_EXTRA_CA_CERTS.
# Exclusions are decided in tests/conformance/vitest.config.mjs only.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
build=${1:-build}
data=$(mktemp -d)
log=$(mktemp)
port=$(free_port)
LONG_POLL_MS=1000
scheme=http tls_flags=()
if [ "${2:-}" = --tls ]; then
  pki=$(mktemp -d)
  tests/lib/test_pki.sh "$pki" || exit 1
  scheme=https tls_flags=(--tls-cert "$pki/server.pem" --tls-key "$pki/server.key")
  export SERVER_CA=$pki/ca.pem NODE_EXTRA_CA_CERTS=$pki/ca.pem
fi
# --webhook-allow-loopback: the subscription tests' webhook receivers listen
# on 127.0.0.1.
start_server "$build/runnel" "$data" "$port" "$log" --long-poll-timeout-ms "$LONG_POLL_MS" \
  --webhook-allow-loopback "${tls_flags[@]}" || exit 1
(cd tests/conformance &&
  NO_COLOR=1 RUNNEL_URL="$scheme://127.0.0.1:$port" RUNNEL_LONG_POLL_TIMEOUT_MS=$LONG_POLL_MS \
    npx vitest run)
rc=$?
stop_server "$log" || { echo "conformance: server did not shut down cleanly"; rc=1; }
rm -rf "$data" "$log" ${pki:+"$pki"}
exit $rc
