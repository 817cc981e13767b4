#!/usr/bin/env bash
# Builds Runnel. Usage: scripts/build.sh [plain|asan]...  (default: plain)
#   plain -> build/       optimized with debug info
#   asan  -> build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- plain
for kind in "$@"; do
  case "$kind" in
    plain) dir=build; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
    asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DRUNNEL_SANITIZE=ON) ;;
    *) echo "build: unknown kind $kind" >&2; exit 2 ;;
  esac
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  log=$(mktemp)
  if ! cmake --build "$dir" -j "$(nproc)" >"$log" 2>&1; then
    grep -Ev '^\[|^make|^Consolidate|^Scanning|^-- ' "$log" >&2
    rm -f "$log"
    echo "build: $dir failed" >&2
    exit 1
  fi
  rm -f "$log"
  echo "build: $dir ok"
done
