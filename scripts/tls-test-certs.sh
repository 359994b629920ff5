#!/usr/bin/env bash
# Certificates for the test servers' TLS (scripts/pg-server.sh, scripts/mariadb-server.sh): a
# private CA (DIR/ca.pem, DIR/ca.key) and a server certificate signed by it (DIR/server.pem,
# DIR/server.key) that names 127.0.0.1 as its only subject, as an IP subjectAltName, so that a
# client which checks the server's name accepts 127.0.0.1 and refuses localhost.
#
#   scripts/tls-test-certs.sh DIR
set -euo pipefail
dir=${1:?usage: tls-test-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=quorum test CA" \
  -keyout ca.key -out ca.pem -addext basicConstraints=critical,CA:TRUE \
  -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key \
  -out server.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >ext.cnf
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
  -extfile ext.cnf -out server.pem 2>/dev/null
chmod 600 server.key ca.key
