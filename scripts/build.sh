#!/usr/bin/env bash
# Builds Runnel. Usage: scripts/build.sh [--server] [plain|asan|release]...
# (default: plain). --server builds only the server binary (not the unit
# tests, the benchmark tools or the BLAKE3 test CLI), as scripts/run.sh does.
#   plain   -> build/          optimized with debug info (RelWithDebInfo; assertions
#                              compiled out)
#   asan    -> build-asan/     AddressSanitizer + UndefinedBehaviorSanitizer (Debug;
#                              assertions on)
#   release -> build-release/  Release (-O3, assertions compiled out)
set -euo pipefail
cd "$(dirname "$0")/.."
target=()
if [ "${1:-}" = --server ]; then
  target=(--target runnel)
  shift
fi
[ $# -gt 0 ] || set -- plain
for kind in "$@"; do
  case "$kind" in
    plain) dir=build; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
    asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DRUNNEL_SANITIZE=ON) ;;
    release) dir=build-release; flags=(-DCMAKE_BUILD_TYPE=Release) ;;
    *) echo "build: unknown kind $kind" >&2; exit 2 ;;
  esac
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  log=$(mktemp)
  if ! cmake --build "$dir" -j "$(nproc)" "${target[@]}" >"$log" 2>&1; then
    grep -Ev '^\[|^make|^Consolidate|^Scanning|^-- ' "$log" >&2
    rm -f "$log"
    echo "build: $dir failed" >&2
    exit 1
  fi
  rm -f "$log"
  echo "build: $dir ok"
done
