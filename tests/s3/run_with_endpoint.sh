#!/usr/bin/env bash
# Runs CMD with a fresh S3 test endpoint (tests/s3/start.sh) in a temporary
# directory, its DIR/env exported, and S3_TEST_DIR naming the directory;
# stops it and removes the directory afterwards. Exits with CMD's status.
#
# usage: tests/s3/run_with_endpoint.sh CMD [ARG...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/runnel-s3-XXXXXX")
cleanup() {
  "$here/stop.sh" "$dir"
  rm -rf "$dir"
}
trap cleanup EXIT
"$here/start.sh" "$dir" >/dev/null || exit 1
set -a
# shellcheck disable=SC1091
. "$dir/env"
set +a
export S3_TEST_DIR=$dir
"$@"
status=$?
if [ $status -ne 0 ]; then
  echo "--- proxy log" >&2; tail -30 "$dir/proxy.log" >&2
  echo "--- s3rver log" >&2; tail -30 "$dir/s3rver.out" >&2
fi
exit $status
