#!/usr/bin/env bash
# The static-analysis pass: cppcheck over every C file the build compiles
# (src/, tests/, bench/, from the compile commands of a configured build
# directory, build-lint/, in which only the generated console_assets.c is
# made) and the fuzz harnesses (fuzz/), llhttp's sources excluded. Checks:
# cppcheck's errors plus warning, performance and portability; any finding
# fails. One process (cppcheck -j loses the
# symbol names the suppressions match on). The judged false positives are in
# scripts/cppcheck-suppressions.xml, each with its reason; inline
# suppressions are not read. Results are cached in build-lint/cppcheck, so
# a second run only analyses what changed. Then the include rules of src/
# (scripts/check_layers.sh; docs/ARCHITECTURE.md, "Layers"): each broken
# edge is a finding too. Ends with "N passed, M failed" (N: files analysed
# without a finding, M: findings).
# Usage: scripts/lint.sh   (scripts/setup.sh test installs cppcheck)
set -uo pipefail
cd "$(dirname "$0")/.."
command -v cppcheck >/dev/null || { echo "lint: cppcheck not found (scripts/setup.sh test installs it)"; exit 2; }
dir=build-lint
mkdir -p "$dir/cppcheck"
if ! cmake -S . -B "$dir" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$dir/configure.log" 2>&1; then
  cat "$dir/configure.log"; echo "lint: cmake configure failed"; exit 2
fi
# the one generated source the compile commands name (the console's files)
if ! cmake --build "$dir" --target console_assets >"$dir/generate.log" 2>&1; then
  cat "$dir/generate.log"; echo "lint: generating console_assets.c failed"; exit 2
fi
common=(--enable=warning,performance,portability --std=c11 --error-exitcode=1 -q
  --suppress-xml=scripts/cppcheck-suppressions.xml
  --template='{file}:{line}: {severity} {id}: {message}')
findings=$dir/findings.txt
: >"$findings"
cppcheck --project="$dir/compile_commands.json" --cppcheck-build-dir="$dir/cppcheck" \
  -i /usr/share/llhttp "${common[@]}" 2>>"$findings"
s1=$?
mkdir -p "$dir/cppcheck-fuzz"
cppcheck --cppcheck-build-dir="$dir/cppcheck-fuzz" -Isrc -I/usr/share/include/llhttp \
  -DLLHTTP_STRICT_MODE=1 -D__GNUC__ "${common[@]}" fuzz/*.c 2>>"$findings"
s2=$?
scripts/check_layers.sh >"$dir/layers.txt"
s3=$?
grep -E '^[^ ]+:[0-9]+: ' "$dir/layers.txt" >>"$findings"
# cppcheck's own failures (not findings) also end here: show everything
cat "$findings"
n=$(grep -cE '^[^ ]+:[0-9]+: ' "$findings")
files=$(grep -oE '"file": *"[^"]+"' "$dir/compile_commands.json" | sed -E 's/.*"([^"]+)"$/\1/' |
        grep -v '^/usr/share/llhttp' | sort -u | wc -l)
files=$((files + $(ls fuzz/*.c | wc -l)))
if { [ "$s1" -ne 0 ] || [ "$s2" -ne 0 ] || [ "$s3" -ne 0 ]; } && [ "$n" -eq 0 ]; then
  cat "$dir/layers.txt"; n=1
fi
bad=$(grep -oE '^[^ ]+:[0-9]+: ' "$findings" | cut -d: -f1 | sort -u | wc -l)
echo "$((files - bad)) passed, $n failed"
[ "$n" -eq 0 ]
