#!/usr/bin/env bash
# Writers beside cold catch-up readers (issue 31, "Mixed"): WRITERS streams
# of 256 B appends (runnel-bench writes, one in flight per stream), first
# alone, then while READERS catch-up readers (runnel-bench replay) read
# streams of COLD_MIB MiB each whose pages were dropped from the page cache
# first (fsync, then posix_fadvise(POSIX_FADV_DONTNEED) on every stream
# file before the writers' streams are made; fincore confirms that they
# stayed out of the page cache until the readers start). The writers' p99 with the readers over their
# p99 alone is the figure: a server that reads the disk on its loop thread
# stalls its writers behind every cold read.
# Also the first appends of new streams: runnel-bench writes on 500 new
# streams, whose maximum latency is the slowest first append (each new
# stream's files are made before its first data is written).
# Runs alternate between the binaries given (BIN...), ROUNDS times, each
# with a fresh server and data directory under DATA_ROOT (a disk, not
# tmpfs: tmpfs keeps no page cache to drop); waits for a quiet machine
# (bench/quiet.sh) before each measured phase (the fill before them lifts
# the load) and prints the load before and after it.
# READ_BPS=N makes the disk slow: the data directories go on an ext4 file
# system on a loop device, and the server's reads of that device are
# limited to N bytes/s (cgroup v1 blkio; root), so a read the page cache
# misses waits for the disk as on a slow or busy one. (This VM's disk
# reads dropped pages back at over 1 GB/s, which hides such stalls.)
# Usage: [ROUNDS=3] [READERS=20] [COLD_MIB=256] [WRITERS=200] [SECONDS_PER_PHASE=8]
#        [DATA_ROOT=/var/tmp] [READ_BPS=N] [BENCH=runnel-bench] bench/cold_reads.sh BIN...
# Prints one line per run and phase: binary, phase, appends/s, p50, p99,
# max (ms), reader MB/s, load before and after.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/quiet.sh
[ $# -ge 1 ] || { echo "usage: bench/cold_reads.sh BIN..."; exit 2; }
rounds=${ROUNDS:-3} readers=${READERS:-20} cold_mib=${COLD_MIB:-256}
writers=${WRITERS:-200} seconds=${SECONDS_PER_PHASE:-8}
bench=${BENCH:-build-release/bench/runnel-bench} # this checkout's: it has replay and --run-id
[ -x "$bench" ] || bench=build/bench/runnel-bench
command -v fincore >/dev/null || { echo "fincore not found (util-linux)"; exit 1; }
work=$(mktemp -d "${DATA_ROOT:-/var/tmp}/cold-reads-XXXXXX")
loop_dev="" throttle=/sys/fs/cgroup/blkio/runnel-cold-reads
cleanup() {
  if [ -n "$loop_dev" ]; then
    umount "$work/disk" 2>/dev/null
    losetup -d "$loop_dev" 2>/dev/null
    rmdir "$throttle" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
data_dir=$work/data
if [ -n "${READ_BPS:-}" ]; then
  [ -d /sys/fs/cgroup/blkio ] || { echo "READ_BPS needs the cgroup v1 blkio hierarchy"; exit 1; }
  truncate -s "$(( (${READERS:-20} * ${COLD_MIB:-256} + 2048) ))M" "$work/disk.img"
  mkfs.ext4 -q "$work/disk.img" && loop_dev=$(losetup -f --show "$work/disk.img") || exit 1
  mkdir -p "$work/disk" "$throttle" && mount "$loop_dev" "$work/disk" || exit 1
  echo "$(( 0x$(stat -c %t "$loop_dev") )):$(( 0x$(stat -c %T "$loop_dev") )) $READ_BPS" \
    >"$throttle/blkio.throttle.read_bps_device"
  data_dir=$work/disk/data
  echo "data on $loop_dev, the server's reads of it limited to $READ_BPS B/s"
fi

# evict DATA: drops the page cache of every stream file there is (the
# readers' streams: the writers' are made afterwards and stay warm, as a
# live stream's are), and lists the data files in $work/cold-files.
evict() {
  python3 - "$1/streams" <<'EOF'
import os, sys
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        fd = os.open(os.path.join(root, f), os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
EOF
  find "$1/streams" -name '*.dat' -size +0 >"$work/cold-files"
}

# Prints the bytes of the evicted files back in the page cache.
resident() {
  tr '\n' '\0' <"$work/cold-files" | xargs -0 fincore --bytes --noheadings --output RES |
    awk '{ s += $1 } END { print s + 0 }'
}

# figures JSON: appends/s p50 p99 max (ms) of a writes report.
figures() {
  node -e 'const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
    const l = r.append_latency, ms = (us) => (us / 1000).toFixed(2);
    console.log(r.appends_per_s.toFixed(0), ms(l.p50_us), ms(l.p99_us), ms(l.max_us));'
}

run() {
  local bin=$1 round=$2 port base data=$data_dir out rd
  port=$(free_port)
  base=http://127.0.0.1:$port
  rm -rf "$data"
  run_begin "$work/run"
  start_server "$bin" "$data" "$port" "$work/log" --max-connections 12000 || return 1
  [ -z "$loop_dev" ] || echo "$SERVER_PID" >"$throttle/cgroup.procs" # with its threads
  "$bench" fill --base "$base" --streams "$readers" --bytes "$((readers * cold_mib))M" \
    --append-bytes 4M --run-id cold --timeout 600 --json >"$work/fill.json" 2>/dev/null || {
    echo "fill failed"; return 1; }
  local left load0
  evict "$data"
  wait_quiet
  load0=$(load1)
  "$bench" writes --base "$base" --streams "$writers" --payload 256 --duration "$seconds" \
    --json 2>/dev/null | figures >"$work/alone"
  echo "$bin round $round alone: $(cat "$work/alone") - load $load0 -> $(load1)"
  wait_quiet
  left=$(resident)
  load0=$(load1)
  # the writers first, their connections and streams made, then the
  # readers: started together, a server that blocks on the readers'
  # first reads kept the writers from starting until the readers' time
  # was over, and the writers then measured a quiet server
  "$bench" writes --base "$base" --streams "$writers" --payload 256 --duration "$seconds" \
    --json 2>/dev/null | figures >"$work/cold" &
  wr=$!
  sleep 1
  "$bench" replay --base "$base" --streams "$readers" --run-id cold --duration "$seconds" \
    --timeout 600 --json >"$work/replay.json" 2>/dev/null &
  rd=$!
  wait "$wr" "$rd"
  out=$(node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    console.log(r.mb_per_s.toFixed(0), r.streams_read_whole)' "$work/replay.json")
  echo "$bin round $round with cold readers: $(cat "$work/cold") - readers MB/s, streams read whole: $out (resident before: $left B) - load $load0 -> $(load1)"
  wait_quiet
  load0=$(load1)
  "$bench" writes --base "$base" --streams 500 --payload 256 --duration "$seconds" \
    --json 2>/dev/null | figures >"$work/first"
  echo "$bin round $round 500 new streams: $(cat "$work/first") - load $load0 -> $(load1)"
  stop_server "$work/log" >/dev/null || true
  run_end "$work/run"
}

for round in $(seq 1 "$rounds"); do
  for bin in "$@"; do run "$bin" "$round" || exit 1; done
done
echo "columns: appends/s p50 p99 max (ms)"
