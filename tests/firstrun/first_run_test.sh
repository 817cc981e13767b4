#!/usr/bin/env bash
# The first hour's scripts, checked from the outside:
#  1. `scripts/setup.sh run` asks apt only for what building and running
#     needs (no Node, npm, cmocka, b3sum, clang, clang-format or cppcheck)
#     and never runs npm;
#     `scripts/setup.sh test` asks for the test toolchain too and installs
#     the conformance suite with `npm ci`. (apt-get, dpkg-query, node and
#     npm are stand-ins on PATH that record their calls and install nothing.)
#  2. A fresh clone stays clean: after the real `scripts/setup.sh test` and a
#     build, `git status --porcelain` is empty and `runnel --version` names
#     no -dirty build.
#  3. The server builds without cmocka (a machine set up with `setup.sh
#     run` has none): configuring with cmocka hidden still builds runnel.
# Usage: tests/firstrun/first_run_test.sh [REPO]  (default: this checkout;
# a clone of its committed HEAD is used). Ends with "N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
repo=${1:-$here}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
check() { # check NAME STATUS [DETAIL]
  if [ "$2" -eq 0 ]; then
    passed=$((passed + 1))
    echo "ok   $1"
  else
    failed=$((failed + 1))
    echo "FAIL $1${3:+: $3}"
  fi
}

git clone -q "$repo" "$work/clone" || { echo "cannot clone $repo"; echo "0 passed, 1 failed"; exit 1; }
clone=$work/clone

# ---- 1. what each setup mode asks for ----
shims=$work/shims
mkdir -p "$shims"
calls=$work/calls
for tool in apt-get npm sudo; do
  printf '#!/bin/sh\necho "%s $*" >>"%s"\n[ "%s" != sudo ] || exec "$@"\n' "$tool" "$calls" "$tool" >"$shims/$tool"
done
printf '#!/bin/sh\nexit 1\n' >"$shims/dpkg-query" # every package missing
printf '#!/bin/sh\necho 20\n' >"$shims/node"      # Node 20 present
chmod +x "$shims"/*
TEST_ONLY='nodejs|npm|libcmocka-dev|b3sum|clang-14|libclang-rt-14-dev|python3-botocore|iproute2|clang-format-14|cppcheck|chromium'
run_setup() { # run_setup MODE: runs the clone's setup.sh with the stand-ins
  : >"$calls"
  PATH="$shims:$PATH" "$clone/scripts/setup.sh" "$1" >"$work/setup-$1.log" 2>&1
}

run_setup run
status=$?
install=$(grep '^apt-get install' "$calls" | tr ' ' '\n' | grep -vE '^(apt-get|install|-y|-qq)$' | sort | tr '\n' ' ')
check "setup.sh run succeeds" "$status" "$(tail -3 "$work/setup-run.log")"
for p in build-essential cmake pkg-config libuv1-dev node-llhttp libcurl4-openssl-dev libssl-dev libjansson-dev libinih-dev libraft-dev libexpat1-dev; do
  echo " $install" | grep -q " $p " ; check "setup.sh run installs $p" $? "asked for: $install"
done
echo " $install" | grep -qE " ($TEST_ONLY) "
[ $? -ne 0 ]; check "setup.sh run installs no test tool" $? "asked for: $install"
grep -q '^npm' "$calls"
[ $? -ne 0 ]; check "setup.sh run does not run npm" $? "$(grep '^npm' "$calls")"

run_setup test
status=$?
install=$(grep '^apt-get install' "$calls" | tr ' ' '\n' | grep -vE '^(apt-get|install|-y|-qq)$' | sort | tr '\n' ' ')
check "setup.sh test succeeds" "$status" "$(tail -3 "$work/setup-test.log")"
for p in libcmocka-dev b3sum clang-14 libclang-rt-14-dev iproute2 clang-format-14 cppcheck chromium build-essential cmake; do
  echo " $install" | grep -q " $p " ; check "setup.sh test installs $p" $? "asked for: $install"
done
grep -q '^npm ci ' "$calls"; check "setup.sh test installs the conformance suite with npm ci" $? "$(grep '^npm' "$calls")"
grep -qE '^npm (install|i) ' "$calls"
[ $? -ne 0 ]; check "setup.sh test does not run npm install" $? "$(grep '^npm' "$calls")"

# ---- 2. a fresh clone stays clean ----
(cd "$clone" && scripts/setup.sh test) >"$work/setup-real.log" 2>&1
check "setup.sh test (for real) in a fresh clone" $? "$(tail -5 "$work/setup-real.log")"
dirty=$(cd "$clone" && git status --porcelain)
check "git status is clean after setup.sh test" "$([ -z "$dirty" ]; echo $?)" "$dirty"
(cd "$clone" && scripts/build.sh --server plain) >"$work/build.log" 2>&1
check "the server builds in the fresh clone" $? "$(tail -5 "$work/build.log")"
version=$("$clone/build/runnel" --version 2>&1)
echo "$version" | grep -qE '^runnel [0-9]+\.[0-9]+\.[0-9]+-[0-9a-f]{7,40}$'
check "runnel --version names a clean build ($version)" $?
dirty=$(cd "$clone" && git status --porcelain)
check "git status is clean after the build" "$([ -z "$dirty" ]; echo $?)" "$dirty"

# ---- 3. the server builds without cmocka ----
# pkg-config answers "not found" for cmocka through a wrapper on PATH.
nocm=$work/nocmocka
mkdir -p "$nocm"
real_pc=$(command -v pkg-config)
printf '#!/bin/sh\nfor a in "$@"; do case "$a" in cmocka*) exit 1 ;; esac; done\nexec %s "$@"\n' "$real_pc" >"$nocm/pkg-config"
chmod +x "$nocm/pkg-config"
PATH="$nocm:$PATH" cmake -S "$clone" -B "$work/build-nocmocka" -DPKG_CONFIG_EXECUTABLE="$nocm/pkg-config" \
  >"$work/nocmocka.log" 2>&1 &&
  cmake --build "$work/build-nocmocka" -j "$(nproc)" --target runnel >>"$work/nocmocka.log" 2>&1
check "the server builds without cmocka" $? "$(grep -E 'rror|cmocka' "$work/nocmocka.log" | head -5)"
grep -q 'cmocka not found: the tests are not built' "$work/nocmocka.log"
check "configuring without cmocka says the tests are not built" $?

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
