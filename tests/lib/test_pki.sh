#!/usr/bin/env bash
# Makes the certificates of the TLS tests in DIR with the openssl command: a
# test CA (ca.pem) and, signed by it for 127.0.0.1 and localhost:
#   server.pem/server.key    the server's certificate (valid for 2 days)
#   server2.pem/server2.key  another one, to be swapped in by a SIGHUP reload
#   expired.pem              server.key's certificate, expired yesterday
#   other.key                a key that matches none of them
# Usage: tests/lib/test_pki.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -out ca.pem -days 3 -subj "/CN=runnel test CA" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >leaf.ext
# leaf NAME KEY DAYS: a certificate for KEY signed by the CA, valid DAYS
# days from now (negative: it expired that long ago).
leaf() {
  openssl req -new -key "$2" -out "$1.csr" -subj "/CN=localhost" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" \
    -days "$3" -extfile leaf.ext -out "$1.pem" 2>/dev/null
  rm -f "$1.csr"
}
key server.key
key server2.key
key other.key
leaf server server.key 2
leaf server2 server2.key 2
leaf expired server.key -1
