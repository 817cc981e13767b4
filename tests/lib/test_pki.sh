#!/usr/bin/env bash
# Makes the certificates of the TLS tests in DIR with the openssl command: a
# test CA (ca.pem) and, signed by it for 127.0.0.1 and localhost:
#   server.pem/server.key    the server's certificate (valid for 2 days)
#   server2.pem/server2.key  another one, to be swapped in by a SIGHUP reload
#   expired.pem              server.key's certificate, expired yesterday
#   other.key                a key that matches none of them
# and the cluster nodes' peer certificates (--peer-cert, --peer-key,
# --peer-ca ca.pem), valid for 2 days for 127.0.0.1 and localhost, each
# naming its node as the URI subject alternative name runnel-node:N:
#   peer-N.pem/peer-N.key    node N's, for N in 1..4, signed by the CA
#   peer-3-next.pem/.key     another one of node 3's (a renewal)
#   peer-none.pem/.key       signed by the CA, naming no node
#   rogue-ca.pem             another CA, and signed by it:
#   rogue-4.pem/rogue-4.key  a certificate naming node 4
# Usage: tests/lib/test_pki.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -out ca.pem -days 3 -subj "/CN=runnel test CA" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >leaf.ext
# leaf NAME KEY DAYS [EXT] [CA]: a certificate for KEY signed by CA (default
# ca), with the extensions in EXT (default leaf.ext), valid DAYS days from
# now (negative: it expired that long ago).
leaf() {
  local ca=${5:-ca}
  openssl req -new -key "$2" -out "$1.csr" -subj "/CN=localhost" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA "$ca.pem" -CAkey "$ca.key" -set_serial "0x$(openssl rand -hex 8)" \
    -days "$3" -extfile "${4:-leaf.ext}" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr"
}
key server.key
key server2.key
key other.key
leaf server server.key 2
leaf server2 server2.key 2
leaf expired server.key -1
# peer NAME CA [N]: a peer certificate signed by CA naming node N (none without N)
peer() {
  key "$1.key"
  printf 'subjectAltName=%sDNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' \
    "${3:+URI:runnel-node:$3,}" >"$1.ext"
  leaf "$1" "$1.key" 2 "$1.ext" "$2"
  rm -f "$1.ext"
}
for n in 1 2 3 4; do peer "peer-$n" ca "$n"; done
peer peer-3-next ca 3
peer peer-none ca
key rogue-ca.key
openssl req -x509 -new -key rogue-ca.key -out rogue-ca.pem -days 3 -subj "/CN=runnel rogue CA" 2>/dev/null
peer rogue-4 rogue-ca 4
