#!/usr/bin/env bash
# Installs what building and running needs (scripts/setup.sh run: compiler,
# CMake, libraries; not the test toolchain), builds the server (build/,
# RelWithDebInfo) and starts it on its embedded store (127.0.0.1:4437, data
# in ./runnel-data). Extra arguments go to `runnel serve` (see
# `build/runnel serve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh run
scripts/build.sh --server plain
exec build/runnel serve "$@"
