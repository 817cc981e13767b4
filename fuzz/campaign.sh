#!/usr/bin/env bash
# A long fuzzing campaign (docs/TESTING.md, "Long run"): every harness of
# fuzz/harnesses.sh runs at once for SECONDS, under nice -n 19, in as many
# processes as it is given (default: fuzz_offset_text 4, fuzz_json 2, the
# others 1, so most of the CPU goes to the harnesses whose executions are
# cheapest; FUZZ_PROCS="fuzz_http=2 ..." overrides). The processes of one
# harness share a scratch corpus directory (libFuzzer reloads it) and read
# the committed seeds; crash inputs go to OUT/artifacts/. Needs an
# up-to-date build-fuzz/ (fuzz/build.sh), whose binaries are copied to
# OUT/bin first, so that a rebuild meanwhile does not change what runs. Ends with one Markdown table row
# per harness: processes x seconds, executions, exec/s (all its processes
# together), cov / ft (the highest of its processes), corpus (libFuzzer's
# count and size, the largest of its processes), crash inputs.
# Usage: fuzz/campaign.sh SECONDS [OUT]   (OUT default build-fuzz/campaign)
#        fuzz/campaign.sh --report SECONDS OUT   (the rows again, from the logs)
set -uo pipefail
cd "$(dirname "$0")/.."
source fuzz/harnesses.sh

report_only=0
if [ "${1:-}" = --report ]; then
  report_only=1
  shift
fi
secs=${1:?usage: fuzz/campaign.sh SECONDS [OUT]}
out=${2:-build-fuzz/campaign}
declare -A procs=([fuzz_offset_text]=4 [fuzz_json]=2)
for kv in ${FUZZ_PROCS:-}; do procs[${kv%=*}]=${kv#*=}; done

# row HARNESS: its table row, from its processes' logs.
row() {
  local h=$1 logs=("$out/$1".*.log) execs=0 n cov corp crashes
  for log in "${logs[@]}"; do
    # the final stats, or (a process that died) its last status line
    n=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
    [ -n "$n" ] || n=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    execs=$((execs + ${n:-0}))
  done
  cov=$(grep -ohE 'cov: [0-9]+ ft: [0-9]+' "${logs[@]}" | awk '$2 > c || ($2 == c && $4 > f) { c = $2; f = $4 } END { printf "%d / %d", c, f }')
  corp=$(grep -ohE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "${logs[@]}" | sed 's/corp: //' | sort -t/ -k1,1n | tail -1)
  crashes=$(find "$out/artifacts" -name "$h-*" | wc -l)
  printf '| `%s` | %d × %d s | %d | %d | %s | %s inputs, %s | %d |\n' "$h" "${#logs[@]}" "$secs" \
    "$execs" $((execs / secs)) "$cov" "${corp%%/*}" "${corp#*/}" "$crashes"
}

if [ "$report_only" -eq 0 ]; then
  mkdir -p "$out/artifacts" "$out/bin"
  for h in "${FUZZ_HARNESSES[@]}"; do
    cp "build-fuzz/$h" "$out/bin/" || { echo "build-fuzz/$h missing: run fuzz/build.sh" >&2; exit 1; }
  done
  pids=()
  for h in "${FUZZ_HARNESSES[@]}"; do
    mkdir -p "$out/corpus/$h"
    for i in $(seq 1 "${procs[$h]:-1}"); do
      # bounded even if a process hangs: libFuzzer's own limit, then SIGINT
      timeout -s INT -k 30 $((secs + 120)) nice -n 19 "$out/bin/$h" -max_total_time="$secs" \
        -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/artifacts/$h-" \
        $(harness_options "$h") "$out/corpus/$h" "fuzz/corpus/$h" >"$out/$h.$i.log" 2>&1 &
      pids+=($!)
    done
  done
  wait "${pids[@]}"
fi
echo '| harness | processes × time | executions | exec/s | cov / ft | corpus | crash inputs |'
echo '|---|---|---|---|---|---|---|'
for h in "${FUZZ_HARNESSES[@]}"; do row "$h"; done
