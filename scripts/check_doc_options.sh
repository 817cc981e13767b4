#!/usr/bin/env bash
# Documentation drift: every option a document names (a `--word` in
# README.md, docs/*.md, BENCHMARKS.md or the man pages' sources) must be
# one the project still has: an option of `runnel` (the help of serve,
# gateway, backup, restore and the client commands), or one that a script,
# benchmark or test harness of the checkout reads (its source names it), or
# a flag of another tool the documents show (FOREIGN below: curl, node,
# git, pkg-config, apt, perf, chromium). A renamed or removed option that a document still
# names fails here. Prints each stale option with the files naming it, then
# "N passed, M failed" (N: options found, M: stale).
# Usage: scripts/check_doc_options.sh [BUILD_DIR]   (default: build)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build}/runnel
[ -x "$bin" ] || { echo "check_doc_options: $bin not found (build first)"; exit 2; }
FOREIGN="--data --data-binary --http1 --http1.1 --http2 --http2-prior-knowledge --insecure
  --cacert --cert --key --fail --silent --show-error --max-time --no-buffer --header --output
  --test --test-name-pattern --test-reporter --openssl-legacy-provider --cflags --libs
  --porcelain --prefix --install --purge --fail-fast --no-sandbox --headless --call-graph"
docs=(README.md docs/*.md)
[ -f BENCHMARKS.md ] && docs+=(BENCHMARKS.md)
known=$(mktemp)
trap 'rm -f "$known"' EXIT
{
  for c in serve gateway backup restore; do "$bin" "$c" --help 2>&1; done
  "$bin" help 2>&1
  for c in create append read tail head close rm publish bootstrap ls stat purge usage cluster; do
    "$bin" "$c" --help 2>&1
  done
  cat scripts/*.sh scripts/*.mjs bench/compare bench/*.sh bench/*.mjs bench/*.c 2>/dev/null
  find tests -path '*/node_modules' -prune -o \( -name '*.mjs' -o -name '*.sh' -o -name '*.c' \) \
    -print0 | xargs -0 cat
  tr ' ' '\n' <<<"$FOREIGN"
} | grep -o -- '--[a-z0-9][a-z0-9.-]*[a-z0-9]' | sort -u >"$known"
passed=0
failed=0
while read -r opt; do
  if grep -qxF -- "$opt" "$known"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "stale option $opt in: $(grep -l -- "$opt\b" "${docs[@]}" | tr '\n' ' ')"
  fi
done < <(cat "${docs[@]}" | grep -o -- '--[a-z0-9][a-z0-9.-]*[a-z0-9]' | sort -u)
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
