#!/usr/bin/env bash
# Sets everything up, builds (plain, ASan+UBSan and Release), and runs every
# test, each suite through ctest (docs/TESTING.md lists them and their
# labels): first the fast tier on the plain build (`ctest -L fast`: the unit
# tests and a cross-section of the black-box files), then the rest of the
# plain build's suites, then the ASan+UBSan build's (every suite that runs
# the server: unit, cluster, S3 client, client, conformance, black-box,
# gateway, crash, subscriptions, faults, abuse), then the Release build's
# unit tests and fast tier (assertions compiled out). The plain build
# alone runs the fuzz smoke, the benchmark smoke and the checks of the
# checkout as a whole (other build types, the first run, the Debian
# packages: root only, the machine left as found). Each step prints its
# counts (passed, failed, skipped) and time, and lists each skipped case
# with its reason; the run ends with "N passed, M failed, K skipped" over
# all test cases and exits non-zero on any failure. Every step but the
# abuse probe (its p99 bound wants the machine to itself) runs its tests
# two at a time (ctest -j 2: each starts its own servers, clusters and S3 endpoint
# on free ports and temporary directories, and most of their time is
# waits), the costliest first (tests/suites.cmake), several labels to a
# step where the pairs were seen to do no harm (crash, subscriptions and
# faults; chaos, fuzz and the benchmark smoke), so that no step ends with
# one long test running alone. The others keep steps of their own: cluster
# tests paired with the S3 suites (hundreds of MiB of writes) met
# elections they do not expect, and the official suite paired with the
# black-box files timed out (its bound is 5 s per case).
#   --fail-fast  stop after the fast tier when it fails (CI: .ci/run)
# Each step runs with TMPDIR in a fresh scratch directory that is removed
# after it, so a run leaves no data directories behind, whatever its tests
# forget or a crash strands.
set -uo pipefail
cd "$(dirname "$0")/.."
fail_fast=0
case "${1:-}" in
  --fail-fast) fail_fast=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--fail-fast]" >&2; exit 2 ;;
esac
scripts/setup.sh test || exit 1
scripts/build.sh plain || exit 1

passed=0
failed=0
skipped=0
logdir=$(mktemp -d)
scratch=$(mktemp -d /tmp/runnel-test-XXXXXX)
trap 'rm -rf "$scratch" "$logdir"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# in_scratch CMD...: runs CMD with TMPDIR set to a new directory, removed
# afterwards; returns CMD's status.
in_scratch() {
  local dir status
  dir=$(mktemp -d "$scratch/step-XXXXXX")
  TMPDIR=$dir "$@"
  status=$?
  rm -rf "$dir"
  return "$status"
}

# count LABEL PASSED FAILED SKIPPED SECONDS: adds a step's counts and
# prints them.
count() {
  passed=$((passed + $2))
  failed=$((failed + $3))
  skipped=$((skipped + $4))
  printf '== %-38s %5d passed, %d failed, %d skipped  (%d s)\n' "$1" "$2" "$3" "$4" "$5"
}

# run_ctest LABEL BUILD CTEST_ARGS...: runs the tests of BUILD that the
# arguments select, counts their cases (scripts/ctest_counts.awk), lists
# the skipped cases with their reasons (node:test's "# SKIP", the scripts'
# "SKIP name: reason" lines) and the known failures (node:test's "# TODO",
# each naming its issue; counted as skipped), and shows what failed.
run_ctest() {
  local label=$1 build=$2 log start p f s failed_tests n
  shift 2
  log="$logdir/$(tr -c 'a-zA-Z0-9' _ <<<"$label").log"
  start=$SECONDS
  in_scratch ctest --test-dir "$build" -V "$@" >"$log" 2>&1
  local status=$?
  read -r p f s failed_tests < <(awk -f scripts/ctest_counts.awk "$log")
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1 # ctest itself failed (no tests selected, a build dir missing)
    tail -20 "$log"
  fi
  for n in $failed_tests; do
    echo "-- failed: $(grep -oE "Test +#$n: [^ ]+" "$log" | head -1 | sed -E 's/.*: //')"
    if grep -qE "^$n: *not ok" "$log"; then
      grep -E "^$n: " "$log" | grep -A25 -E "^$n: *not ok" | head -80
    else
      grep -E "^$n: " "$log" | tail -60
    fi
  done
  grep -E '^[0-9]+: *ok .* # SKIP' "$log" | sed -E 's/^[0-9]+: */   skipped: /'
  grep -E '^[0-9]+: SKIP ' "$log" | sed -E 's/^[0-9]+: SKIP /   skipped: /'
  grep -E '^[0-9]+: *(not )?ok .* # TODO' "$log" | sed -E 's/^[0-9]+: */   known failure: /'
  count "$label" "${p:-0}" "${f:-0}" "${s:-0}" $((SECONDS - start))
}

# Every registered test must carry a label that a step below selects.
labels='^(unit|cluster|s3|client|conformance|blackbox|gateway|crash|subs|faults|abuse|chaos|fuzz|bench|project)$'
unlabelled=$(ctest --test-dir build -N -LE "$labels" | grep -E 'Test +#')
if [ -z "$unlabelled" ]; then count "every ctest test has a step" 1 0 0 0
else echo "tests no step runs (give them a label):"; echo "$unlabelled"; count "every ctest test has a step" 0 1 0 0; fi

run_ctest "fast tier (build)" build -j 2 -L '^fast$' --no-tests=error
if [ "$fail_fast" -eq 1 ] && [ "$failed" -ne 0 ]; then
  echo "the fast tier failed: the full run is skipped (--fail-fast)"
  echo "$passed passed, $failed failed, $skipped skipped"
  exit 1
fi
scripts/build.sh asan release || exit 1

# the plain build: the rest of its suites (the fast tier's are not repeated)
run_ctest "unit and cluster tests (build)" build -j 2 -L '^(unit|cluster)$' -LE '^fast$'
run_ctest "S3 client (build)" build -j 2 -L '^s3$' -LE '^fast$' --no-tests=error
run_ctest "client tests (build)" build -j 2 -L '^client$' -LE '^fast$' --no-tests=error
run_ctest "conformance suite (build)" build -j 2 -L '^conformance$' -LE '^fast$' --no-tests=error
# snapshots_parts' 8193-request case: the plain build's full run only
RUNNEL_BB_HEAVY=1 run_ctest "black-box tests (build)" build -j 2 -L '^blackbox$' -LE '^fast$' --no-tests=error
run_ctest "gateway tests (build)" build -j 2 -L '^gateway$' -LE '^fast$' --no-tests=error
run_ctest "crash, subscriptions, faults, kill points (build)" build -j 2 -L '^(crash|subs|faults)$' \
  -LE '^fast$' --no-tests=error
run_ctest "abuse resistance (build)" build -L '^abuse$' -LE '^fast$' --no-tests=error
run_ctest "chaos short schedule, fuzz and benchmark smoke (build)" build -j 2 -L '^(chaos|fuzz|bench)$' \
  -LE '^fast$' --no-tests=error
run_ctest "build types, first run, packages" build -j 2 -L '^project$' --no-tests=error

# the ASan+UBSan build: every suite that runs the server
run_ctest "unit and cluster tests (build-asan)" build-asan -j 2 -L '^(unit|cluster)$' --no-tests=error
run_ctest "S3 client (build-asan)" build-asan -j 2 -L '^s3$' --no-tests=error
run_ctest "client tests (build-asan)" build-asan -j 2 -L '^client$' --no-tests=error
run_ctest "conformance suite (build-asan)" build-asan -j 2 -L '^conformance$' --no-tests=error
run_ctest "black-box tests (build-asan)" build-asan -j 2 -L '^blackbox$' --no-tests=error
run_ctest "gateway tests (build-asan)" build-asan -j 2 -L '^gateway$' --no-tests=error
run_ctest "crash, subscriptions, faults, kill points (build-asan)" build-asan -j 2 \
  -L '^(crash|subs|faults)$' --no-tests=error
run_ctest "abuse resistance (build-asan)" build-asan -L '^abuse$' --no-tests=error

# the Release build (assertions compiled out, as in the plain build, which
# runs everything): its unit tests and the fast tier
run_ctest "unit tests, fast tier (build-release)" build-release -j 2 -L '^(unit|fast)$' --no-tests=error

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
