#!/usr/bin/env bash
# Builds Runnel's Debian packages into build-deb/: runnel, librunnel0 and
# librunnel-dev (cpack -G DEB). Usage: packaging/deb.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-deb}
cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_INSTALL_SYSCONFDIR=/etc -DCPACK_SET_DESTDIR=ON -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON \
  >/dev/null
cmake --build "$out" -j "$(nproc)" --target runnel runnel_client runnel_client_static runnel_man >/dev/null
(cd "$out" && cpack -G DEB >/dev/null)
ls "$out"/*.deb
