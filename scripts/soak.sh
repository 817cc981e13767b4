#!/usr/bin/env bash
# Soak test (not part of CI): a mixed workload with continuous verification
# against one server for a configurable time; see tests/soak/soak.mjs.
#
#   scripts/soak.sh [--duration-s 1800] [--restart-every-s 120] [--writers 12] ...
#
# Builds the plain binary unless --bin is given, copies it so a rebuild
# during the run changes nothing, and ends with the figures and one
# "N passed, M failed" line (exit 0 only when M == 0). Every option of
# tests/soak/soak.mjs is passed through (node tests/soak/soak.mjs --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --bin=*) bin=${1#--bin=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ -z "$bin" ]; then
  scripts/build.sh plain >&2
  bin=build/runnel
fi
copy=$(mktemp /tmp/runnel-soak-bin.XXXXXX)
trap 'rm -f "$copy"' EXIT
cp "$bin" "$copy"
chmod +x "$copy"
node tests/soak/soak.mjs --bin "$copy" "${args[@]}"
