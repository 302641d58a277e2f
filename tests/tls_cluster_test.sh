#!/bin/sh
# TLS end to end: a 2-server, 2-worker Wide&Deep job with
# PSTRAIN_TLS_* set (the workers' ring over TCP, so every connection is
# TLS), separate processes on 127.0.0.1. Before the workers
# start, strangers knock at a server's node port and at the scheduler's: a
# client with a certificate from another CA, a TLS 1.2 client and a
# plaintext client are each refused with a logged line that names the
# source address and OpenSSL's reason; then the job trains to its end.
# Bad TLS settings end a node at once with exit 2 and one line naming the
# file and the variable, its own expired certificate included. A worker
# whose certificate another CA signed is refused by the scheduler and exits
# at once (1), as one with the wrong token does, instead of retrying for
# PSTRAIN_CONNECT_TIMEOUT.
# Usage: sh tests/tls_cluster_test.sh PSTRAIN_BIN
set -u
BIN="$1"
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
. "$REPO/tests/cluster_util.sh"
trap 'cluster_cleanup; rm -rf "$WORK"' EXIT
trap "exit 1" HUP INT TERM PIPE
echo "tls_cluster_test in $WORK"
command -v openssl > /dev/null || { echo "skipped: no openssl command line"; exit 77; }
command -v python3 > /dev/null || { echo "skipped: no python3 (the plaintext client)"; exit 77; }

sh "$REPO/tests/tools/make_test_certs.sh" "$WORK/pki" node || fail "make_test_certs.sh"
sh "$REPO/tests/tools/make_test_certs.sh" "$WORK/other" stranger || fail "make_test_certs.sh"
export PSTRAIN_TLS_CERT="$WORK/pki/node.pem" PSTRAIN_TLS_KEY="$WORK/pki/node.key"
export PSTRAIN_TLS_CA="$WORK/pki/ca.pem"

# expect_usage_error PATTERN VAR=VALUE...: `pstrain local` with those
# settings exits 2 at once with one line matching PATTERN.
expect_usage_error() {
  pattern=$1
  shift
  env "$@" "$BIN" local --servers 1 --workers 1 > "$WORK/usage.out" 2>&1
  code=$?
  [ "$code" = 2 ] || fail "$* exited $code, expected 2: $(cat "$WORK/usage.out")"
  [ "$(wc -l < "$WORK/usage.out")" = 1 ] || fail "$*: not one line: $(cat "$WORK/usage.out")"
  grep -q "$pattern" "$WORK/usage.out" || fail "$*: '$(cat "$WORK/usage.out")' lacks '$pattern'"
  echo "  $(cat "$WORK/usage.out")"
}
expect_usage_error "go together: PSTRAIN_TLS_CA is not set" -u PSTRAIN_TLS_CA
expect_usage_error "PSTRAIN_TLS_KEY file '$WORK/nope.key' cannot be read" \
  PSTRAIN_TLS_KEY="$WORK/nope.key"
expect_usage_error "PSTRAIN_TLS_KEY file '$WORK/other/stranger.key' does not match" \
  PSTRAIN_TLS_KEY="$WORK/other/stranger.key"
expect_usage_error "PSTRAIN_TLS_CA file '$WORK/pki/node.key'" PSTRAIN_TLS_CA="$WORK/pki/node.key"
sh "$REPO/tests/tools/make_expired_cert.sh" "$WORK/pki" expired || fail "make_expired_cert.sh"
expect_usage_error "PSTRAIN_TLS_CERT file '$WORK/pki/expired.pem': the certificate has expired" \
  PSTRAIN_TLS_CERT="$WORK/pki/expired.pem" PSTRAIN_TLS_KEY="$WORK/pki/expired.key"

# The workers' ring over TCP, so that it too runs over TLS.
export MS_SERVER_NUM=2 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1 ID_PREFIX=tls
export PSTRAIN_RING_TRANSPORT=tcp
gen_criteo "$WORK/data" 2000
job_config wide_deep "$WORK/data" 2 - > "$WORK/job.yaml"
export PSTRAIN_CONFIG="$WORK/job.yaml"
start_scheduler
start server_0
start server_1
wait_for_count "The server node id:" "$(node_log scheduler)" 2 ||
  fail "the servers never registered over TLS"
port=$(sed -n 's/.*The server node id:tls-server_0,node ip: [0-9.]*,node port:\([0-9]*\) .*/\1/p' \
  "$(node_log scheduler)" | head -n 1)
[ -n "$port" ] || fail "no node port for server 0 in the scheduler's log"

# knock PORT WHAT ARGS...: an openssl client with ARGS at PORT; it must not
# get through (its handshake fails or the server closes on it).
knock() {
  port=$1 what=$2
  shift 2
  if echo | timeout 10 openssl s_client -connect "127.0.0.1:$port" -quiet "$@" \
    > "$WORK/knock.out" 2>&1; then
    grep -q "verify error\|alert\|errno" "$WORK/knock.out" ||
      fail "$what got through: $(cat "$WORK/knock.out")"
  fi
}
# plaintext PORT: a pstrain frame header in clear at PORT; the peer must
# close the connection within 10 s.
plaintext() {
  python3 - "$1" << 'PY' || fail "a plaintext client at port $1 was not closed"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"PSTR\x01\x00\x00\x00\x10\x00\x00\x00" + bytes(8) + bytes(16))
while s.recv(4096):
    pass
PY
}
other_ca="-cert $WORK/other/stranger.pem -key $WORK/other/stranger.key -CAfile $WORK/pki/ca.pem"
knock "$port" "a client with another CA's certificate" $other_ca
knock "$port" "a TLS 1.2 client" -tls1_2 -cert "$WORK/pki/node.pem" -key "$WORK/pki/node.key"
plaintext "$port"
plaintext "$MS_SCHED_PORT"

# expect_refusal NAME PATTERN: NAME logged a refusal of a 127.0.0.1 client
# matching PATTERN.
expect_refusal() {
  line="closing the connection: TLS handshake with 127.0.0.1:[0-9]* failed: .*$2"
  wait_for_count "$line" "$(node_log "$1")" 1 50 || fail "$1 logged no refusal matching '$2'"
  echo "  $1: $(grep -m 1 "$line" "$(node_log "$1")" | cut -c 1-220)"
}
expect_refusal server_0 "certificate verify failed"
expect_refusal server_0 "unsupported protocol"
expect_refusal server_0 "wrong version number\|packet length too long\|record layer failure"
expect_refusal scheduler "wrong version number\|packet length too long\|record layer failure"
alive server_0 || fail "server_0 died of the strangers"

# A worker with another CA's certificate (it trusts ours): refused, it stops
# at once, well before its connect timeout of 60 s.
(
  export MS_ROLE=MS_WORKER MS_NODE_ID=tls-foreign PSTRAIN_CONNECT_TIMEOUT=60
  export PSTRAIN_TLS_CERT="$WORK/other/stranger.pem" PSTRAIN_TLS_KEY="$WORK/other/stranger.key"
  exec "$BIN" >> "$(node_log foreign)" 2>&1
) &
echo $! > "$WORK/foreign.pid"
wait_exit foreign 100
[ "$status" = 1 ] || fail "a worker with a foreign certificate: $status after 10 s, expected exit 1"
grep -q "refused this node: .*TLS .* failed: .*alert unknown ca" "$(node_log foreign)" ||
  fail "the foreign worker does not say it was refused: $(tail -n 2 "$(node_log foreign)")"
echo "  foreign: $(grep -m 1 "refused this node" "$(node_log foreign)" | cut -c 1-220)"
[ "$(grep -c "TLS .* failed" "$(node_log foreign)")" -le 2 ] || fail "the foreign worker retried"

start worker_0
start worker_1
for n in worker_0 worker_1 server_0 server_1 scheduler; do
  wait_exit "$n" 1200
  [ "$status" = 0 ] || fail "$n ended with $status under TLS"
done
grep -q "the job is over: every worker finished" "$(node_log scheduler)" ||
  fail "the scheduler did not see the job finish"
grep -q "epoch: 2 step: [0-9]*, loss is" "$(node_log worker_0)" ||
  fail "worker 0 logged no loss of epoch 2"
echo "  worker_0: $(grep "loss is" "$(node_log worker_0)" | tail -n 1 | cut -c 1-160)"
echo "PASSED"
