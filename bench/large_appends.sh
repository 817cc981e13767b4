#!/usr/bin/env bash
# Large appends: the rate at which one client stores 1 GiB in appends of
# 4 MiB and of 32 MiB (each acknowledged only once durable), on Runnel with
# large appends written once (the default --large-append-bytes 1 MiB), on
# the same binary with every byte logged as before (--large-append-bytes 0),
# on the Node reference server, and the disk's own rate for the same sizes
# (dd oflag=dsync: each block written and synced before the next). Every
# run starts on a fresh data directory on the root disk; the four are
# alternated round by round, and each run waits for a quiet machine first
# (bench/quiet.sh: 1-minute load below 1.0) and records the load at its
# start and end.
#
# Usage: bench/large_appends.sh [--rounds N] [--bin DIR] [--out DIR] [--mib N] [--before DIR]
#   --bin: where runnel and runnel-bench are (default build-release)
#   --mib: MiB stored per run (default 1024; a multiple of 32)
#   --before: another build's directory, run as a fifth configuration
#     ("before", its defaults) in each round, for a before/after comparison
# Prints one line per run ("size config MB/s load-before load-after"), then
# the medians per size and configuration; raw JSON stays in the out DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=3 bin=build-release out="" mib=1024 before_bin=""
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --mib) mib=$2; shift 2 ;;
    --before) before_bin=$2; shift 2 ;;
    *) echo "usage: bench/large_appends.sh [--rounds N] [--bin DIR] [--out DIR] [--mib N] [--before DIR]"; exit 2 ;;
  esac
done
[ -x "$bin/runnel" ] && [ -x "$bin/bench/runnel-bench" ] || { echo "large_appends: build $bin first (scripts/build.sh release)"; exit 2; }
[ -d bench/reference/node_modules/@durable-streams/server ] ||
  (cd bench/reference && npm ci --no-audit --no-fund >/dev/null) || exit 1
out=${out:-$(mktemp -d /var/tmp/large-appends.XXXXXX)}
mkdir -p "$out"
# shellcheck source=bench/quiet.sh
. bench/quiet.sh
port=18731
total=$((mib << 20))
data=/var/tmp/large-appends-data

wait_ready() {
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/__runnel/readyz" >/dev/null 2>&1 && return 0
    grep -q '^listening' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# run SIZE CONFIG: one measured run; prints its line.
run() {
  local size=$1 config=$2 mbps pid log="$out/$config-$size.log"
  rm -rf "$data" && mkdir -p "$data"
  wait_quiet
  local before after
  before=$(load1)
  if [ "$config" = dd ]; then
    mbps=$(dd if=/dev/zero of="$data/dd" bs="$size" count=$((total / size)) oflag=dsync 2>&1 |
      awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "copied,") t = $(i + 1); print $1 / t / 1e6 }')
  else
    case $config in
      once) "$bin/runnel" serve --listen "127.0.0.1:$port" --data-dir "$data" >"$log" 2>&1 & ;;
      before) "$before_bin/runnel" serve --listen "127.0.0.1:$port" --data-dir "$data" >"$log" 2>&1 & ;;
      twice) "$bin/runnel" serve --listen "127.0.0.1:$port" --data-dir "$data" --large-append-bytes 0 >"$log" 2>&1 & ;;
      reference) node bench/reference/start.mjs "$port" "$data" 30000 1024 >"$log" 2>&1 & ;;
    esac
    pid=$!
    wait_ready "$log" || { echo "large_appends: $config did not start"; cat "$log"; kill "$pid"; return 1; }
    "$bin/bench/runnel-bench" fill --streams 1 --bytes "$total" --append-bytes "$size" \
      --base "http://127.0.0.1:$port" --timeout 600 --json >"$out/$config-$size.json" 2>>"$log"
    mbps=$(node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(r.fill_mb_per_s ?? "")' "$out/$config-$size.json" 2>/dev/null)
    if [ "$config" = once ]; then
      local once
      once=$(curl -s "http://127.0.0.1:$port/__runnel/metrics" | awk '$1 == "runnel_bytes_written_once_total" { print $2 }')
      [ "${once:-0}" -ge "$total" ] || echo "large_appends: written once only ${once:-0} bytes of $total" >&2
    fi
    kill -TERM "$pid"; wait "$pid" 2>/dev/null
  fi
  after=$(load1)
  echo "$((size >> 20))MiB $config ${mbps:-failed} $before $after" | tee -a "$out/runs.txt"
}

for r in $(seq 1 "$rounds"); do
  for size in $((4 << 20)) $((32 << 20)); do
    for config in dd once twice reference ${before_bin:+before}; do run "$size" "$config"; done
  done
done
rm -rf "$data"
echo "# medians (MB/s) of $rounds rounds; raw results in $out"
node -e '
const runs = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map((l) => l.split(" "));
const by = new Map();
for (const [size, config, mbps] of runs) {
  const k = `${size} ${config}`;
  if (!by.has(k)) by.set(k, []);
  if (mbps !== "failed") by.get(k).push(Number(mbps));
}
for (const [k, v] of [...by].sort()) {
  v.sort((a, b) => a - b);
  console.log(`${k} ${v.length ? v[(v.length - 1) >> 1].toFixed(0) : "failed"} (${v.map((x) => x.toFixed(0)).join(", ")})`);
}' "$out/runs.txt"
