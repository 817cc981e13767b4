#!/usr/bin/env bash
# Checks that CMake's standard build types build without a warning (every
# target compiles with -Werror, so a warning fails the build). Usage:
# scripts/check_build_types.sh [TYPE...]  (default: Debug Release
# RelWithDebInfo MinSizeRel). Builds in a temporary directory under TMPDIR,
# removed afterwards; prints each type's result and ends with one
# "N passed, M failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- Debug Release RelWithDebInfo MinSizeRel
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
for type in "$@"; do
  dir="$work/$type"
  log="$work/$type.log"
  if cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" >"$log" 2>&1 &&
     cmake --build "$dir" -j "$(nproc)" >>"$log" 2>&1; then
    passed=$((passed + 1))
    echo "== $type: built without warnings"
  else
    failed=$((failed + 1))
    echo "== $type: FAILED"
    grep -E 'error|warning' "$log" | head -20
  fi
  rm -rf "$dir"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
