#!/bin/sh
# Makes DIR/NAME.pem and DIR/NAME.key: a node certificate signed by the CA
# of tests/tools/make_test_certs.sh in DIR (ca.pem, ca.key), valid only in
# January 2020, so expired now. (openssl ca sets any validity dates; x509
# -req of OpenSSL 3.0 only counts days from now.)
#   sh tests/tools/make_expired_cert.sh DIR NAME
set -eu
[ $# -eq 2 ] || { echo "usage: $0 DIR NAME" >&2; exit 2; }
dir=$1 name=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umask 077
: > "$work/index.txt"
echo 1000 > "$work/serial"
cat > "$work/ca.cnf" <<END
[ca]
default_ca = expired
[expired]
database = $work/index.txt
new_certs_dir = $work
serial = $work/serial
default_md = sha256
policy = anything
unique_subject = no
[anything]
commonName = supplied
[node]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth,clientAuth
END
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout "$dir/$name.key" -out "$work/$name.csr" -subj "/CN=$name" 2> /dev/null
openssl ca -batch -config "$work/ca.cnf" -cert "$dir/ca.pem" -keyfile "$dir/ca.key" \
  -in "$work/$name.csr" -out "$dir/$name.pem" -notext -extensions node \
  -startdate 20200101000000Z -enddate 20200201000000Z 2> "$work/ca.err" ||
  { cat "$work/ca.err" >&2; exit 1; }
