#!/bin/sh
# Makes a CA and node certificates for pstrain's TLS (PSTRAIN_TLS_CERT,
# PSTRAIN_TLS_KEY, PSTRAIN_TLS_CA), with the openssl command line.
#
#   sh tests/tools/make_test_certs.sh DIR [NAME ...]
#
# Writes DIR/ca.pem and DIR/ca.key (the cluster's CA: keep ca.key off the
# nodes), then for each NAME (default: node) DIR/NAME.pem and DIR/NAME.key,
# signed by that CA. Keys are EC P-256; certificates are valid for 825 days
# and for both ends of a connection (serverAuth and clientAuth), since a
# node is a TLS server to some peers and a client to others. An existing
# DIR/ca.pem is reused, so nodes can be added later.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 DIR [NAME ...]" >&2; exit 2; }
dir=$1
shift
[ $# -ge 1 ] || set -- node
mkdir -p "$dir"
umask 077
if [ ! -f "$dir/ca.pem" ]; then
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 825 -subj "/CN=pstrain cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
fi
ext="$dir/.node.ext"
cat > "$ext" <<END
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
END
for name in "$@"; do
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 825 -extfile "$ext" -out "$dir/$name.pem" 2>/dev/null
  rm -f "$dir/$name.csr"
done
rm -f "$ext"
