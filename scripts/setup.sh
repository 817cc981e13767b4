#!/usr/bin/env bash
# Installs what is missing on Debian 12, for one of two purposes:
#   scripts/setup.sh run    what building and running the server needs: the C
#                           compiler, CMake, pkg-config and the libraries
#                           (scripts/run.sh)
#   scripts/setup.sh test   that, plus the test toolchain: cmocka (unit
#                           tests), b3sum (BLAKE3 cross-check), clang-14 and
#                           its libFuzzer runtime (fuzz smoke), iproute2
#                           (the cluster chaos harness), clang-format and
#                           cppcheck (CI's format and static-analysis
#                           stages), Node.js >= 20
#                           and the conformance suite's npm packages, installed
#                           exactly as tests/conformance/package-lock.json
#                           pins them (npm ci: the lock file and every other
#                           tracked file stay untouched) (scripts/test.sh)
# Without an argument: test. Safe to run repeatedly; installs nothing that
# is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-test}
case "$mode" in
  run | test) ;;
  *) echo "usage: scripts/setup.sh [run|test]" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# libcurl (webhook deliveries), libssl (Ed25519, SHA-256, HMAC) and jansson
# (subscription request bodies and state) serve src/subs/; libraft
# (Canonical's C Raft on libuv) serves src/cluster/; expat reads S3's XML
# answers (src/tiers/s3/); libnghttp2 is HTTP/2 (src/transport/http2.c);
# curl is for the README's examples.
RUN_PACKAGES=(build-essential cmake pkg-config git curl libuv1-dev node-llhttp
  libcurl4-openssl-dev libssl-dev libjansson-dev libinih-dev libraft-dev libexpat1-dev
  libnghttp2-dev)
# python3-botocore: the S3 test endpoint's proxy (tests/s3/proxy.py)
# recomputes every SigV4 signature with botocore. iproute2: the cluster
# chaos harness's network namespaces, veth pairs and blackhole routes
# (tests/cluster/chaos/netns.mjs). clang-format-14 and cppcheck:
# scripts/check_format.sh and scripts/lint.sh. nghttp2-client: nghttp and
# h2load, the HTTP/2 tests' frame-level client and load generator;
# nghttp2-proxy: nghttpx, through which scripts/conformance_h2.sh runs the
# conformance suite over HTTP/2. chromium: the browser of tests/browser (a
# page on another origin using the server: CORS as a browser applies it).
# gnuplot-nox: the benchmark pictures (bench/plots.mjs; the bench smoke
# draws them).
TEST_PACKAGES=(libcmocka-dev b3sum clang-14 libclang-rt-14-dev python3-botocore iproute2
  clang-format-14 cppcheck nghttp2-client
  nghttp2-proxy chromium gnuplot-nox)

wanted=("${RUN_PACKAGES[@]}")
[ "$mode" = run ] || wanted+=("${TEST_PACKAGES[@]}")
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
node_major() { command -v node >/dev/null && node -p 'process.versions.node.split(".")[0]' || echo 0; }
if [ "$mode" = test ] && [ "$(node_major)" -lt 20 ] && ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "$mode" = run ]; then
  echo "setup: ok (run)"
  exit 0
fi

if [ "$(node_major)" -lt 20 ]; then
  # Debian 12 ships Node 18; vitest 4 needs 20+. The npm registry's "node"
  # package carries the official binary.
  echo "setup: installing Node.js 20 from the npm registry"
  $SUDO npm install -g --no-audit --no-fund node@20 >/dev/null
  hash -r
fi
conf=tests/conformance
if [ ! -f "$conf/node_modules/.package-lock.json" ] ||
   [ "$conf/package-lock.json" -nt "$conf/node_modules/.package-lock.json" ]; then
  # npm ci installs exactly what the lock file names and never writes it (an
  # `npm install` rewrote it, so a fresh clone reported a -dirty version).
  # The lock file must list every platform's optional packages: regenerate
  # it with `npm install --package-lock-only`, which does, never with a
  # plain `npm install`, which leaves out other platforms' packages and
  # makes `npm ci` refuse the lock.
  echo "setup: installing the conformance suite (npm ci)"
  (cd "$conf" && npm ci --no-audit --no-fund >/dev/null)
fi
# s3rver: the S3 implementation behind the test endpoint's proxy, pinned by
# tests/s3/package-lock.json.
if [ ! -d tests/s3/node_modules/s3rver ]; then
  echo "setup: installing the S3 test endpoint (npm ci in tests/s3)"
  (cd tests/s3 && npm ci --no-audit --no-fund >/dev/null)
fi
# @durable-streams/client: the official TypeScript client that
# tests/client_ts runs against a single node and a cluster, pinned by
# tests/client_ts/package-lock.json.
if [ ! -f tests/client_ts/node_modules/.package-lock.json ] ||
   [ tests/client_ts/package-lock.json -nt tests/client_ts/node_modules/.package-lock.json ]; then
  echo "setup: installing the official TypeScript client (npm ci in tests/client_ts)"
  (cd tests/client_ts && npm ci --no-audit --no-fund >/dev/null)
fi
# puppeteer-core: drives chromium for tests/browser, pinned by
# tests/browser/package-lock.json (it downloads no browser of its own).
if [ ! -f tests/browser/node_modules/.package-lock.json ] ||
   [ tests/browser/package-lock.json -nt tests/browser/node_modules/.package-lock.json ]; then
  echo "setup: installing the browser tests' driver (npm ci in tests/browser)"
  (cd tests/browser && npm ci --no-audit --no-fund >/dev/null)
fi
echo "setup: ok (test)"
