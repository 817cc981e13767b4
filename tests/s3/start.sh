#!/usr/bin/env bash
# Starts the S3 test endpoint on loopback: s3rver (objects under DIR/data,
# bucket "runnel-test") behind the SigV4-verifying, fault-injecting proxy
# (proxy.py). Prints the endpoint URL; writes DIR/env (shell assignments:
# S3_ENDPOINT, S3_VHOST_ENDPOINT, S3_CONTROL, S3_UPSTREAM, S3_BUCKET and the
# AWS_* credentials and region the proxy checks signatures with) and the
# pid files tests/s3/stop.sh DIR reads. Logs: DIR/s3rver.out (every request
# with S3RVER_LOG=1), DIR/proxy.log.
#
# The secret key is random per start. Set S3_TEST_REGION or
# S3_TEST_SESSION_TOKEN to change the region or require a session token, and
# S3_TEST_TLS=1 for an https endpoint with a self-signed certificate for
# 127.0.0.1, localhost and runnel-test.localhost (DIR/env then names it in
# S3_CA_FILE).
#
# usage: tests/s3/start.sh DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
mkdir -p "$1"
dir=$(cd "$1" && pwd)
if [ ! -d "$here/node_modules/s3rver" ]; then
  (cd "$here" && npm ci --no-audit --no-fund >/dev/null)
fi
py="$here/python.sh"
"$py" -c 'import botocore' || exit 1

fail() {
  echo "start.sh: $*" >&2
  "$here/stop.sh" "$dir" || true
  tail -20 "$dir/s3rver.out" "$dir/proxy.log" >&2 2>/dev/null || true
  exit 1
}

# wait_for FILE PATTERN: waits (10 s at most) until FILE holds PATTERN.
wait_for() {
  for _ in $(seq 200); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

mkdir -p "$dir/data"
# --openssl-legacy-provider: s3rver encrypts listing continuation tokens with
# DES, which OpenSSL 3 keeps in its legacy provider.
rm -f "$dir/s3rver.out" "$dir/proxy.json"
node --openssl-legacy-provider "$here/s3rver.mjs" "$dir/data" runnel-test </dev/null >"$dir/s3rver.out" 2>&1 &
echo $! >"$dir/s3rver.pid"
wait_for "$dir/s3rver.out" '"port"' || fail "s3rver did not start"
upstream=$(head -1 "$dir/s3rver.out" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["port"])')

scheme=http
tls_args=()
if [ "${S3_TEST_TLS:-}" = 1 ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -keyout "$dir/tls.key" -out "$dir/tls.crt" \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:runnel-test.localhost" 2>/dev/null ||
    fail "openssl could not make a certificate"
  scheme=https
  tls_args=(--tls-cert "$dir/tls.crt" --tls-key "$dir/tls.key")
fi
access_key=AKIARUNNELTEST000001
secret_key=$(head -c 30 /dev/urandom | base64 | tr -d '\n')
region=${S3_TEST_REGION:-us-east-1}
token=${S3_TEST_SESSION_TOKEN:-}
S3PROXY_ACCESS_KEY=$access_key S3PROXY_SECRET_KEY=$secret_key S3PROXY_REGION=$region \
  S3PROXY_SESSION_TOKEN=$token \
  "$py" "$here/proxy.py" --upstream "$upstream" --s3rver-dir "$dir/data" --state "$dir/proxy.json" \
  "${tls_args[@]}" </dev/null >"$dir/proxy.log" 2>&1 &
echo $! >"$dir/proxy.pid"
wait_for "$dir/proxy.json" control_port || fail "the proxy did not start"
read -r port control < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["port"], s["control_port"])' "$dir/proxy.json")

{
  echo "S3_ENDPOINT=$scheme://127.0.0.1:$port"
  echo "S3_VHOST_ENDPOINT=$scheme://localhost:$port"
  [ "$scheme" = http ] || echo "S3_CA_FILE=$dir/tls.crt"
  echo "S3_CONTROL=http://127.0.0.1:$control"
  echo "S3_UPSTREAM=http://127.0.0.1:$upstream"
  echo "S3_BUCKET=runnel-test"
  echo "AWS_ACCESS_KEY_ID=$access_key"
  echo "AWS_SECRET_ACCESS_KEY=$secret_key"
  echo "AWS_REGION=$region"
  [ -z "$token" ] || echo "AWS_SESSION_TOKEN=$token"
} >"$dir/env"
echo "$scheme://127.0.0.1:$port"
