#!/usr/bin/env bash
# Sets everything up, builds, and starts the server on its embedded store
# (127.0.0.1:4437, data in ./runnel-data). Extra arguments go to
# `runnel serve` (see `build/runnel serve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh plain
exec build/runnel serve "$@"
