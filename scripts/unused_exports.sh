#!/usr/bin/env bash
# Exported-but-unused functions of the server: every global function that an
# object of runnel_core or runnel_cluster defines (nm over a
# built build directory) and that no other object of the build references
# (the server, librunnel and its command, the unit tests, the benchmark
# tools). Each is either dead (remove it) or used only inside its own file
# (make it static): the line says which, from a count of the name in its
# source file.
# librunnel's public API (include/runnel/) is not in these libraries.
# Functions that only the tests or benchmarks call count as used (they are
# the seams those tools test through). Prints each finding, then
# "N passed, M failed" (N: the libraries' objects without a finding, M:
# findings).
# Usage: scripts/unused_exports.sh [BUILD_DIR]   (default: build)
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
libs=("$dir"/CMakeFiles/runnel_core.dir "$dir"/CMakeFiles/runnel_cluster.dir)
for l in "${libs[@]}"; do
  [ -d "$l" ] || { echo "unused_exports: $l not found (build $dir first)"; exit 2; }
done
# objects of the libraries' current sources only: a build directory reused
# across commits keeps the objects of sources since removed or moved
lib_objs=()
while read -r o; do
  src=${o#*.dir/}
  [ -f "${src%.o}" ] && lib_objs+=("$o")
done < <(find "${libs[@]}" -name '*.o' | sort)
mapfile -t all_objs < <(find "$dir" -name '*.o' -path '*CMakeFiles*' | sort)
[ "${#lib_objs[@]}" -gt 0 ] || { echo "unused_exports: no objects under $dir"; exit 2; }

# symbols some object references (undefined there)
declare -A used=()
while read -r sym; do
  used[$sym]=1
done < <(nm -u "${all_objs[@]}" 2>/dev/null | awk 'NF >= 2 && $(NF-1) == "U" {print $NF}')

# every global function of the libraries, as OBJECT SYMBOL
declare -A findings=()
while read -r o sym; do
  [ -n "${used[$sym]:-}" ] && continue
  # the source file the object was compiled from: CMakeFiles/<t>.dir/<src>.c.o
  src=${o#*.dir/}
  src=${src%.o}
  if [ "$(grep -cw -- "$sym" "$src" 2>/dev/null)" -gt 1 ]; then
    echo "$src: $sym is used only in this file: make it static"
  else
    echo "$src: $sym is unused: remove it"
  fi
  findings[$o]=$((${findings[$o]:-0} + 1))
done < <(nm -A --defined-only -g "${lib_objs[@]}" | awk '$(NF-1) == "T" {sub(/:.*/, "", $1); print $1, $NF}')
failed=0
for o in "${!findings[@]}"; do
  failed=$((failed + findings[$o]))
done
echo "$((${#lib_objs[@]} - ${#findings[@]})) passed, $failed failed"
[ "$failed" -eq 0 ]
