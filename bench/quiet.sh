# Sourced by bench/compare and bench/capacity.sh (not run): wait for a
# quiet machine before each measuring run, and record how quiet it was.
#
# The machine is shared: before a run, wait_quiet polls the 1-minute load
# average every QUIET_POLL seconds until it is below QUIET_LOAD, for at most
# QUIET_MAX seconds per wait and QUIET_BUDGET seconds over the whole
# invocation (after that every run starts at once). The run is measured
# either way; run_env records what it found, so the report can say which
# figures come from a busy machine.
QUIET_LOAD=${QUIET_LOAD:-1.0}
QUIET_POLL=${QUIET_POLL:-30}
QUIET_MAX=${QUIET_MAX:-1200}
QUIET_BUDGET=${QUIET_BUDGET:-7200}
QUIET_SPENT=0
QUIET_WAITED=0
QUIET_OK=0

load1() { cut -d' ' -f1 /proc/loadavg; }

# wait_quiet: sets QUIET_OK (1: load below QUIET_LOAD, 0: gave up) and
# QUIET_WAITED (seconds).
wait_quiet() {
  local start=$SECONDS limit=$QUIET_MAX left
  left=$((QUIET_BUDGET - QUIET_SPENT))
  [ "$left" -lt "$limit" ] && limit=$left
  [ "$limit" -lt 0 ] && limit=0
  QUIET_OK=0
  while :; do
    if awk -v l="$(load1)" -v q="$QUIET_LOAD" 'BEGIN { exit !(l < q) }'; then
      QUIET_OK=1
      break
    fi
    local spent=$((SECONDS - start))
    [ "$spent" -ge "$limit" ] && break
    local nap=$QUIET_POLL
    [ $((limit - spent)) -lt "$nap" ] && nap=$((limit - spent))
    sleep "$nap"
  done
  QUIET_WAITED=$((SECONDS - start))
  QUIET_SPENT=$((QUIET_SPENT + QUIET_WAITED))
}

# cpu_line: the aggregate "cpu" line of /proc/stat (jiffies: user nice
# system idle iowait irq softirq steal ...).
cpu_line() { head -1 /proc/stat; }

# run_begin TAG: waits for quiet, then notes the load and the CPU counters
# at the start of the run in TAG.env / TAG.stat0.
run_begin() {
  local tag=$1
  wait_quiet
  {
    echo "waited_s=$QUIET_WAITED"
    echo "quiet=$QUIET_OK"
    echo "load_start=$(load1)"
  } >"$tag.env"
  cpu_line >"$tag.stat0"
}

# run_end TAG: notes the load and CPU counters at the end of the run.
run_end() {
  local tag=$1
  cpu_line >"$tag.stat1"
  echo "load_end=$(load1)" >>"$tag.env"
}
