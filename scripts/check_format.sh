#!/usr/bin/env bash
# Checks that every tracked C file (*.c, *.h) is formatted as the repo's
# .clang-format says, with clang-format 14 (Debian 12's; other versions
# format some constructs differently). Prints each file that differs, with
# the start of the change clang-format would make; ends with
# "N passed, M failed" (one check per file).
# Usage: scripts/check_format.sh   (scripts/setup.sh test installs clang-format)
set -uo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format) || {
  echo "check_format: clang-format not found (scripts/setup.sh test installs it)"
  exit 2
}
mapfile -d '' files < <(git ls-files -z '*.c' '*.h')
[ "${#files[@]}" -gt 0 ] || { echo "check_format: no C files found"; exit 2; }
# one clang-format process for all files: it names each violation's file
report=$("$fmt" --dry-run --Werror "${files[@]}" 2>&1)
status=$?
mapfile -t bad < <(grep -oE '^[^:]+:[0-9]+:[0-9]+: error: code should be clang-formatted' <<<"$report" |
                   cut -d: -f1 | sort -u)
if [ "$status" -ne 0 ] && [ "${#bad[@]}" -eq 0 ]; then
  echo "check_format: clang-format failed:"; echo "$report" | head -20
  echo "0 passed, 1 failed"
  exit 1
fi
for f in "${bad[@]}"; do
  echo "FAIL $f is not clang-formatted:"
  "$fmt" "$f" | diff -u "$f" - | head -20
done
[ "${#bad[@]}" -eq 0 ] || echo "fix with: $fmt -i FILE..."
echo "$((${#files[@]} - ${#bad[@]})) passed, ${#bad[@]} failed"
[ "${#bad[@]}" -eq 0 ]
