#!/usr/bin/env bash
# Generate the TLS material for grit's real-peer tests into DIR (created if
# missing). Nothing is checked in: every run makes fresh keys.
#
#   ca.pem ca.key            test CA (the only root the tests trust)
#   server.pem server.key    signed by the CA; SANs foo.test.google.fr,
#                            *.test.google.fr, localhost, 127.0.0.1, ::1
#   client.pem client.key    signed by the CA; clientAuth, for mTLS tests
#   expired.pem expired.key  signed by the CA, same SANs, validity in 2020
#   untrusted.pem untrusted.key  self-signed, same SANs, not from the CA
#   wronghost.pem wronghost.key  signed by the CA, SAN wrong.example.com only
#
# Usage: gen_certs.sh DIR
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
command -v openssl >/dev/null || { echo "gen_certs.sh: openssl not found" >&2; exit 1; }

dir=$1
mkdir -p "$dir"
cd "$dir"

good_sans="DNS:foo.test.google.fr,DNS:*.test.google.fr,DNS:localhost,IP:127.0.0.1,IP:::1"

newkey() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
    -out "$1" 2>/dev/null
  chmod 600 "$1"
}

# CA.
newkey ca.key
openssl req -x509 -new -key ca.key -sha256 -days 30 -out ca.pem \
  -subj "/O=grit tests/CN=grit test CA" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -addext "subjectKeyIdentifier=hash"

# sign NAME CN EXTFILE_BODY [x509 options...]: key, CSR, CA-signed cert.
sign() {
  local name=$1 cn=$2 ext=$3
  shift 3
  newkey "$name.key"
  openssl req -new -key "$name.key" -out "$name.csr" -subj "/O=grit tests/CN=$cn"
  printf '%s\n' "$ext" > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key \
    -CAcreateserial -sha256 -extfile "$name.ext" -out "$name.pem" "$@" \
    2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

server_ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$good_sans"

sign server "foo.test.google.fr" "$server_ext" -days 30

sign client "grit-test-client" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth" -days 30

sign wronghost "wrong.example.com" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:wrong.example.com" -days 30

# Expired: `openssl x509 -days` cannot go backwards in OpenSSL 3.0, so use
# `openssl ca` with explicit dates and a throwaway database.
newkey expired.key
openssl req -new -key expired.key -out expired.csr \
  -subj "/O=grit tests/CN=foo.test.google.fr"
mkdir -p ca-db
: > ca-db/index.txt
echo 1000 > ca-db/serial
cat > ca-db/ca.cnf <<EOF
[ ca ]
default_ca = test_ca
[ test_ca ]
database = ca-db/index.txt
serial = ca-db/serial
new_certs_dir = ca-db
certificate = ca.pem
private_key = ca.key
default_md = sha256
policy = policy_any
x509_extensions = server_ext
copy_extensions = none
unique_subject = no
[ policy_any ]
organizationName = optional
commonName = supplied
[ server_ext ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = $good_sans
EOF
openssl ca -batch -config ca-db/ca.cnf -in expired.csr -out expired.pem \
  -startdate 20200101000000Z -enddate 20200201000000Z -notext 2>/dev/null
rm -rf ca-db expired.csr

# Untrusted: self-signed, otherwise like the good server certificate.
newkey untrusted.key
openssl req -x509 -new -key untrusted.key -sha256 -days 30 -out untrusted.pem \
  -subj "/O=grit tests/CN=foo.test.google.fr" \
  -addext "basicConstraints=critical,CA:FALSE" \
  -addext "extendedKeyUsage=serverAuth" \
  -addext "subjectAltName=$good_sans"

rm -f ca.srl

# Sanity: the good ones verify, the bad ones do not.
openssl verify -CAfile ca.pem server.pem client.pem wronghost.pem >/dev/null
if openssl verify -CAfile ca.pem expired.pem >/dev/null 2>&1; then
  echo "gen_certs.sh: expired.pem unexpectedly verifies" >&2
  exit 1
fi
if openssl verify -CAfile ca.pem untrusted.pem >/dev/null 2>&1; then
  echo "gen_certs.sh: untrusted.pem unexpectedly verifies" >&2
  exit 1
fi
