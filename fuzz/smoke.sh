#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/build.sh) and runs each one for a short,
# bounded time (FUZZ_SECONDS, default 20) on its seed corpus fuzz/corpus/<name>.
# New corpus entries go to a scratch directory (the committed seeds are only
# read); crash inputs are kept in build-fuzz/artifacts/. Exits non-zero when
# a harness fails (crash, sanitizer report, failed check, timeout, leak) and
# ends with one "N passed, M failed" line, one check per harness.
set -uo pipefail
cd "$(dirname "$0")/.."

source fuzz/harnesses.sh
SECONDS_EACH=${FUZZ_SECONDS:-20}

if ! fuzz/build.sh; then
  echo "0 passed, ${#FUZZ_HARNESSES[@]} failed"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts=build-fuzz/artifacts
mkdir -p "$artifacts"
passed=0
failed=0
for h in "${FUZZ_HARNESSES[@]}"; do
  opts=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$artifacts/$h-")
  opts+=($(harness_options "$h"))
  mkdir -p "$work/$h"
  log="$work/$h.log"
  "build-fuzz/$h" "${opts[@]}" "$work/$h" "fuzz/corpus/$h" >"$log" 2>&1
  status=$?
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  if [ "$status" -eq 0 ] && grep -q '^Done ' "$log"; then
    passed=$((passed + 1))
    printf '== %-20s ok      %s runs, %s\n' "$h" "${runs:-?}" "${cov:-?}"
  else
    failed=$((failed + 1))
    printf '== %-20s FAILED  (exit %d; inputs in %s)\n' "$h" "$status" "$artifacts"
    grep -vE '^#[0-9]+|^INFO:' "$log" | tail -60
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
