#!/usr/bin/env bash
# Runs the official Durable Streams conformance suite against one node of a
# 3-node cluster with a single Raft group: the group's leader, found from
# /__runnel/cluster (following redirects is the client's job, and the suite
# does not follow them on writes). Usage: scripts/conformance_cluster.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dir=$(mktemp -d)
LONG_POLL_MS=1000
trap 'scripts/cluster.sh stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
# --webhook-allow-loopback: the subscription tests' webhook receivers listen
# on 127.0.0.1.
# --election-timeout-ms 5000: on a loaded machine the followers can miss the
# leader's heartbeats for over a second (seen during the large-payload
# tests, plain and ASan builds), elect another leader, and every later test
# then fails against a follower; the suite tests one node, not failover.
urls=$(scripts/cluster.sh start "$dir" --groups 1 --bin "$build/runnel" -- \
  --long-poll-timeout-ms "$LONG_POLL_MS" --webhook-allow-loopback --election-timeout-ms 5000) || exit 1
first=$(head -1 <<<"$urls")
leader=$(curl -s "$first/__runnel/cluster" |
  python3 -c 'import json,sys; d=json.load(sys.stdin); l=d["groups"][0]["leader"]; print([n["url"] for n in d["nodes"] if n["id"]==l][0])')
echo "conformance against the leader of group 0: $leader"
(cd tests/conformance &&
  NO_COLOR=1 RUNNEL_URL="$leader" RUNNEL_LONG_POLL_TIMEOUT_MS=$LONG_POLL_MS RUNNEL_TEST_TIMEOUT_MS=15000 \
    npx vitest run)
rc=$?
scripts/cluster.sh stop "$dir" || { echo "conformance: a node did not shut down cleanly"; rc=1; }
for log in "$dir"/node-*.log; do
  if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$log"; then
    echo "sanitizer report in $log:"
    grep -A30 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$log" | head -60
    rc=1
  fi
done
exit $rc
