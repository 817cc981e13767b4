#!/usr/bin/env bash
# Installs everything Runnel needs to build and test on Debian 12: the C
# toolchain and libraries from apt, Node.js (>= 20, for the conformance
# suite's vitest) and the npm test dependencies. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# libcurl (webhook deliveries), libssl (Ed25519, SHA-256, HMAC) and jansson
# (subscription request bodies and state) serve src/subs/; libraft
# (Canonical's C Raft on libuv) serves src/cluster/.
APT_PACKAGES=(build-essential cmake pkg-config git curl libuv1-dev node-llhttp libcmocka-dev
  libcurl4-openssl-dev libssl-dev libjansson-dev libinih-dev libraft-dev
  b3sum clang-14 libclang-rt-14-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
node_major() { command -v node >/dev/null && node -p 'process.versions.node.split(".")[0]' || echo 0; }
if [ "$(node_major)" -lt 20 ] && ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "$(node_major)" -lt 20 ]; then
  # Debian 12 ships Node 18; vitest 4 needs 20+. The npm registry's "node"
  # package carries the official binary.
  echo "setup: installing Node.js 20 from the npm registry"
  $SUDO npm install -g --no-audit --no-fund node@20 >/dev/null
  hash -r
fi
if [ ! -d tests/conformance/node_modules/@durable-streams/server-conformance-tests ] ||
   [ ! -d tests/conformance/node_modules/vitest ]; then
  # npm install (not ci): npm 11 leaves platform-only optional packages out
  # of the lock file, which `npm ci` then refuses; versions stay pinned.
  echo "setup: installing the conformance suite (npm install)"
  (cd tests/conformance && npm install --no-audit --no-fund >/dev/null)
fi
# ---- S3 (issue 16) ----------------------------------------------------------
# libexpat1-dev: the S3 client reads S3's XML answers with expat (a build
# dependency of runnel_core). python3-botocore: the test endpoint's proxy
# (tests/s3/proxy.py) recomputes every SigV4 signature with botocore.
# s3rver: the S3 implementation behind it, pinned by tests/s3/package-lock.json.
S3_APT_PACKAGES=(libexpat1-dev python3-botocore)
s3_missing=()
for p in "${S3_APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || s3_missing+=("$p")
done
if [ "${#s3_missing[@]}" -gt 0 ]; then
  echo "setup: installing ${s3_missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${s3_missing[@]}" >/dev/null
fi
if [ ! -d tests/s3/node_modules/s3rver ]; then
  echo "setup: installing the S3 test endpoint (npm ci in tests/s3)"
  (cd tests/s3 && npm ci --no-audit --no-fund >/dev/null)
fi
# ---- end S3 -------------------------------------------------------------------
echo "setup: ok"
