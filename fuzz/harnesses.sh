# The fuzz harnesses and the libFuzzer options each one always runs with,
# shared by fuzz/smoke.sh and fuzz/campaign.sh (sourced, not run).

# Every harness, in the order the scripts run and report them.
FUZZ_HARNESSES=(fuzz_json fuzz_offset_text fuzz_wal_recovery fuzz_http fuzz_http2)

# harness_options NAME: prints NAME's own options (input size, dictionary),
# one a line.
harness_options() {
  case "$1" in
    fuzz_json) echo -max_len=8192 ;;
    fuzz_http) printf '%s\n' -max_len=8192 -dict=fuzz/fuzz_http.dict ;;
    fuzz_http2) echo -max_len=8192 ;;
  esac
}
