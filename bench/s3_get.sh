#!/usr/bin/env bash
# Ranged-GET throughput from s3rver: curl (the baseline the cold tier's
# catch-up target is measured against) and the S3 client (runnel-s3-bench),
# on the same endpoint in the same run. Starts the S3 test endpoint
# (tests/s3/start.sh), stores a 64 MiB object through the verifying proxy,
# then reads it PASSES times in 4 MiB ranges, one range at a time and four
# at a time, ROUNDS times: directly from s3rver (the raw figure; the client signs with
# s3rver's own S3RVER key) and through the Python SigV4-verifying proxy.
#
# usage: bench/s3_get.sh [BUILD_DIR] [PASSES] [ROUNDS]  (defaults: build, 2, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
passes=${2:-2}
rounds=${3:-5}
bench="$build/bench/runnel-s3-bench"
[ -x "$bench" ] || { echo "s3_get.sh: build $bench first" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/runnel-s3-bench-XXXXXX")
trap 'tests/s3/stop.sh "$dir"; rm -rf "$dir"' EXIT
tests/s3/start.sh "$dir" >/dev/null
set -a
. "$dir/env"
set +a
object_mib=64
range=$((4 << 20))
key=bench/object
"$bench" --endpoint "$S3_ENDPOINT" --bucket "$S3_BUCKET" --key "$key" --put --passes 1 >/dev/null

# curl_ranges BASE PARALLEL: one curl command reading the object PASSES
# times in 4 MiB ranges (one connection per parallel slot, kept alive);
# prints MiB/s.
curl_ranges() {
  local url="$1/$S3_BUCKET/$key" parallel=$2 args=() first=1
  for _ in $(seq "$passes"); do
    for ((off = 0; off < object_mib << 20; off += range)); do
      [ $first -eq 1 ] || args+=(--next)
      first=0
      args+=(-s -o /dev/null -r "$off-$((off + range - 1))" "$url")
    done
  done
  local flags=()
  [ "$parallel" -le 1 ] || flags=(--parallel --parallel-max "$parallel")
  local t0 t1
  t0=$(date +%s.%N)
  curl "${flags[@]}" "${args[@]}" 2>/dev/null || { echo "s3_get.sh: curl failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk -v mib=$((object_mib * passes)) '{printf "%.1f", mib / ($2 - $1)}'
}

client() {
  local endpoint=$1 concurrency=$2
  shift 2
  "$bench" --endpoint "$endpoint" --bucket "$S3_BUCKET" --key "$key" --passes "$passes" \
    --concurrency "$concurrency" "$@" | sed -E 's/.*"mib_per_s":([0-9.]+).*/\1/'
}

# Each round measures every configuration once (interleaved, so a busy
# machine slows them alike); the table shows the median and the range.
labels=()
results=()
measure() { # LABEL VALUE
  local i
  for i in "${!labels[@]}"; do
    if [ "${labels[$i]}" = "$1" ]; then
      results[$i]="${results[$i]} $2"
      return
    fi
  done
  labels+=("$1")
  results+=("$2")
}
for _ in $(seq "$rounds"); do
  for c in 1 4; do
    measure "curl -> s3rver, $c at a time" "$(curl_ranges "$S3_UPSTREAM" $c)"
    measure "client -> s3rver, $c at a time (memory)" \
      "$(AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER client "$S3_UPSTREAM" $c)"
    measure "client -> s3rver, $c at a time (file)" \
      "$(AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER client "$S3_UPSTREAM" $c --to-file "$dir")"
    measure "client -> verifying proxy, $c at a time" "$(client "$S3_ENDPOINT" $c)"
  done
done
printf '%-44s %8s %18s\n' "64 MiB object, 4 MiB ranges, MiB/s" median "min-max ($rounds runs)"
for i in "${!labels[@]}"; do
  echo "${results[$i]}" | tr ' ' '\n' | grep . | sort -n |
    awk -v label="${labels[$i]}" '{v[NR] = $1} END {
      m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%-44s %8.1f %18s\n", label, m, sprintf("%.1f-%.1f", v[1], v[NR])}'
done
