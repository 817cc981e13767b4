#!/usr/bin/env bash
# blake3_vs_b3sum.sh - cross-checks Runnel's BLAKE3 (the test-only runnel-b3
# CLI built from tests/unit/b3_cli.c) against b3sum, the reference
# implementation's CLI (Debian package b3sum), on random files.
#
# usage: tests/unit/blake3_vs_b3sum.sh [BUILD_DIR [N]]
#   BUILD_DIR  CMake build directory holding tests/runnel-b3, relative to the
#              repository root or absolute (default: build)
#   N          number of random files, at most 200 (default: 24)
#
# Each file (random bytes, 0..3 MiB; a third of them on or next to a
# power-of-two or chunk boundary) is one case and passes when b3sum's digest
# equals runnel-b3's read from the file in random-size pieces (code path
# avx2, sse41, portable in turn, as the CPU has them), from standard input,
# and, for every fourth file, 300 bytes of extended output (-l) too.
# Ends with "N passed, M failed"; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
build=${1:-build}
n=${2:-24}
bin="$build/tests/runnel-b3"
if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -gt 200 ]; then
  echo "blake3_vs_b3sum: N must be an integer 0..200" >&2
  exit 2
fi
if ! command -v b3sum >/dev/null; then
  echo "blake3_vs_b3sum: b3sum not installed (apt-get install b3sum)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
if [ ! -x "$bin" ]; then
  echo "blake3_vs_b3sum: $bin not built (make runnel-b3)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

# Code paths this CPU has; file i is hashed with path i % count (stdin: auto).
paths=()
for p in avx2 sse41 portable; do
  "$bin" -i "$p" - </dev/null >/dev/null 2>&1 && paths+=("$p")
done

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
max=$((3 * 1024 * 1024))
passed=0
failed=0
for ((i = 0; i < n; i++)); do
  r=$(((RANDOM << 15 | RANDOM) % (max + 1)))
  if ((i % 3 == 0)); then # near a boundary: 2^k or a multiple of 1024, +-1
    k=$((RANDOM % 22))
    base=$((i % 2 ? 1 << k : (r / 1024) * 1024))
    size=$((base + RANDOM % 3 - 1))
    ((size < 0)) && size=0
    ((size > max)) && size=$max
  else
    size=$r
  fi
  f="$dir/in$i"
  head -c "$size" /dev/urandom >"$f"
  piece=$((1 + (RANDOM << 15 | RANDOM) % 200000))
  want=$(b3sum --no-names "$f")
  impl=${paths[i % ${#paths[@]}]}
  got_file=$("$bin" -i "$impl" -p "$piece" "$f")
  got_stdin=$("$bin" - <"$f")
  ok=1
  [ "$got_file" = "$want" ] || ok=0
  [ "$got_stdin" = "$want" ] || ok=0
  if ((i % 4 == 0)); then
    [ "$("$bin" -l 300 -p "$piece" "$f")" = "$(b3sum --no-names -l 300 "$f")" ] || ok=0
  fi
  if ((ok)); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: size $size piece $piece path $impl: b3sum $want, runnel-b3 $got_file (file) $got_stdin (stdin)"
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
