#!/usr/bin/env bash
# Sets everything up, builds (plain, ASan+UBSan and Release), and runs every
# test: unit tests (ctest/cmocka), the S3 client against s3rver behind a
# SigV4-verifying proxy, the client library's and CLI's tests (ctest label
# client), the official conformance suite, the black-box tests (node --test
# tests/blackbox), the crash, log-damage, subscription, fault-injection
# (failed syncs, full disk, kill points) and abuse tests, each against the
# plain and the ASan+UBSan builds; the unit and black-box tests against the
# Release build too (assertions compiled out); the check that the other
# standard build types (Debug, MinSizeRel) build without a warning; plus the
# BLAKE3 cross-check, the benchmark smoke, the fuzz smoke, the first-run
# check (what each setup mode installs; a fresh clone stays clean through
# setup and build) and the Debian packages (built, installed with dpkg -i,
# run and purged; root only; the machine is left as found). Ends with
# "N passed, M failed" over all test cases; exits non-zero on any failure.
# Each step runs with TMPDIR in a fresh scratch directory that
# is removed after it, so a run leaves no data directories behind, whatever
# its tests forget or a crash strands.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test || exit 1
scripts/build.sh plain asan release || exit 1

passed=0
failed=0
logdir=$(mktemp -d)
scratch=$(mktemp -d /tmp/runnel-test-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
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

# count LABEL PASSED FAILED STATUS: adds a step's counts; a step that failed
# without reporting failures counts as one failure.
count() {
  local label=$1 p=${2:-0} f=${3:-0} status=$4
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  passed=$((passed + p))
  failed=$((failed + f))
  printf '== %-34s %5d passed, %d failed\n' "$label" "$p" "$f"
}

run_unit() {
  local build=$1 label=${2:-} log="$logdir/unit-$1${2:+-$2}.log"
  # the client library's (label client) and the S3 client's (label s3)
  # tests are steps of their own
  (cd "$build" && if [ -n "$label" ]; then ctest --output-on-failure --no-tests=error -V -L "$label"
                  else ctest --output-on-failure --no-tests=error -V -LE "client|s3"; fi) >"$log" 2>&1
  local status=$?
  local p f
  p=$(grep -oE '\[  PASSED  \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
  f=$(grep -oE '\[  FAILED  \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
  # node --test files registered with ctest (tests/cluster) report TAP totals
  p=$((p + $(grep -oE '^[0-9]+: # pass [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')))
  f=$((f + $(grep -oE '^[0-9]+: # fail [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')))
  [ "$status" -eq 0 ] || tail -50 "$log"
  count "${label:-unit} tests ($build)" "$p" "$f" "$status"
}

# run_s3 BUILD: the S3 client's tests (ctest label s3: SigV4 against AWS's
# examples and botocore, credentials, every client call and fault against
# s3rver behind the SigV4-verifying proxy of tests/s3).
run_s3() {
  local build=$1 log="$logdir/s3-$1.log"
  in_scratch bash -c "cd '$build' && ctest --output-on-failure -V -L s3" >"$log" 2>&1
  local status=$?
  local p f
  # cmocka's "[  PASSED  ] N" and the botocore cross-check's "N passed, M failed"
  p=$( (grep -oE '\[  PASSED  \] [0-9]+' "$log" | awk '{print $4}'
        grep -oE '[0-9]+ passed, [0-9]+ failed' "$log" | awk '{print $1}') | awk '{s+=$1} END {print s+0}')
  f=$( (grep -oE '\[  FAILED  \] [0-9]+' "$log" | awk '{print $4}'
        grep -oE '[0-9]+ passed, [0-9]+ failed' "$log" | awk '{print $3}') | awk '{s+=$1} END {print s+0}')
  [ "$status" -eq 0 ] || tail -60 "$log"
  count "S3 client ($build)" "$p" "$f" "$status"
}

run_conformance() {
  local build=$1 log="$logdir/conformance-$1.log"
  in_scratch scripts/conformance.sh "$build" >"$log" 2>&1
  local status=$?
  local line p f
  line=$(grep -E '^\s+Tests\s' "$log" | tail -1)
  p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
  f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0)
  [ "$status" -eq 0 ] || grep -E 'FAIL|✗|×|AssertionError|Error:|server' "$log" | head -60
  count "conformance suite ($build)" "${p:-0}" "${f:-0}" "$status"
}

run_blackbox() {
  local build=$1 log="$logdir/blackbox-$1.log"
  RUNNEL_BIN="$build/runnel" RUNNEL_BB_HEAVY=1 in_scratch node --test tests/blackbox/ >"$log" 2>&1
  local status=$?
  local p f
  p=$(grep -E '^# pass [0-9]+' "$log" | awk '{print $3}')
  f=$(grep -E '^# fail [0-9]+' "$log" | awk '{print $3}')
  [ "$status" -eq 0 ] || grep -B2 -A25 'not ok' "$log" | head -80
  grep -E '^ *ok .* # SKIP' "$log" | sed 's/^ */   skipped: /'
  count "black-box tests ($build)" "${p:-0}" "${f:-0}" "$status"
}

# run_script LABEL LOG CMD...: runs a script that ends with "N passed, M
# failed" and counts it.
run_script() {
  local label=$1 log="$logdir/$2.log"
  shift 2
  in_scratch "$@" >"$log" 2>&1
  local status=$?
  local line p f
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  p=$(echo "$line" | awk '{print $1}')
  f=$(echo "$line" | awk '{print $3}')
  [ "$status" -eq 0 ] || tail -40 "$log"
  count "$label" "${p:-0}" "${f:-0}" "$status"
}


run_unit build
run_unit build-asan
run_s3 build
run_s3 build-asan
run_unit build client
run_unit build-asan client
run_unit build-release
run_conformance build
run_conformance build-asan
run_blackbox build
run_blackbox build-asan
run_blackbox build-release
run_script "build types Debug, MinSizeRel" build-types scripts/check_build_types.sh Debug MinSizeRel
run_script "crash test (build)" crash-plain node tests/crash/crash_test.mjs --bin build/runnel --rounds 6
run_script "crash test (build-asan)" crash-asan node tests/crash/crash_test.mjs --bin build-asan/runnel --rounds 3
run_script "log damage (build)" logdamage-plain node tests/crash/log_damage_test.mjs --bin build/runnel
run_script "log damage (build-asan)" logdamage-asan node tests/crash/log_damage_test.mjs --bin build-asan/runnel
run_script "subscription tests (build)" subs-plain node tests/subs/subs_test.mjs --bin build/runnel
run_script "subscription tests (build-asan)" subs-asan node tests/subs/subs_test.mjs --bin build-asan/runnel
run_script "BLAKE3 vs b3sum (build)" b3sum tests/unit/blake3_vs_b3sum.sh build
run_script "benchmark smoke (build)" bench-smoke bench/smoke.sh build
run_script "fault injection (build)" faults-plain node tests/faults/fault_test.mjs --bin build/runnel
run_script "fault injection (build-asan)" faults-asan node tests/faults/fault_test.mjs --bin build-asan/runnel
run_script "kill points (build)" kill-plain node tests/faults/killpoints_test.mjs --bin build/runnel
run_script "kill points (build-asan)" kill-asan node tests/faults/killpoints_test.mjs --bin build-asan/runnel --quick
run_script "abuse resistance (build)" abuse-plain node tests/abuse/abuse_test.mjs --bin build/runnel
run_script "abuse resistance (build-asan)" abuse-asan node tests/abuse/abuse_test.mjs --bin build-asan/runnel --p99-ms 400
# the cluster's chaos harness, short schedule (24 faults; needs root for its
# network namespaces: docs/TESTING.md "Cluster chaos harness")
run_script "chaos short schedule (build)" chaos-short node tests/cluster/chaos/run.mjs --bin build/runnel --schedule short
run_script "fuzz smoke" fuzz-smoke fuzz/smoke.sh
run_script "Debian packages (install, run, purge)" packages tests/client/package_test.sh
run_script "first run (setup, fresh clone)" first-run tests/firstrun/first_run_test.sh

rm -rf "$logdir"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
