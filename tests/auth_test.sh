#!/bin/sh
# Authenticated connections, live: a 1-server,
# 2-worker Wide&Deep job with MS_CLUSTER_TOKEN, separate processes on
# 127.0.0.1, worker 0 reaching the scheduler through a recording proxy
# (tests/tools/record_proxy.py). The probes run while server 0 and worker 0
# wait for worker 1 (their ports are open); then worker 1 comes and the job
# trains. It asserts what a user or an attacker would notice:
#   - a node with another token is refused by the scheduler: it exits 1 at
#     once saying authentication failed, and the scheduler's log names its
#     address and the check;
#   - a stranger with another token registering with a live worker's node
#     id is refused, and the worker goes on;
#   - a client with another token, or none, is refused at the server's and
#     the worker's node port, each log naming the source and the check;
#   - the token's bytes never cross the wire (the proxy's capture);
#   - a peer sending one byte a second is dropped within the handshake
#     deadline (PSTRAIN_HANDSHAKE_TIMEOUT, 2 s here);
#   - the job trains to the end, exit status 0 everywhere.
# Usage: sh tests/auth_test.sh PSTRAIN_BIN
set -u
BIN="$1"
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
. "$REPO/tests/cluster_util.sh"
trap 'cluster_cleanup; rm -rf "$WORK"' EXIT
trap "exit 1" HUP INT TERM PIPE
command -v python3 > /dev/null || { echo "skipped: no python3"; exit 77; }
echo "auth_test in $WORK"

TOKEN="tok-$$-Zq7uV3xK"
export MS_SERVER_NUM=1 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1 ID_PREFIX=auth
export MS_CLUSTER_TOKEN="$TOKEN" PSTRAIN_HANDSHAKE_TIMEOUT=2 PSTRAIN_CONNECT_TIMEOUT=20
gen_criteo "$WORK/data" 8000
job_config wide_deep "$WORK/data" 2 - > "$WORK/job.yaml"
export PSTRAIN_CONFIG="$WORK/job.yaml"
start_scheduler
SCHED_PORT=$MS_SCHED_PORT

# probe NAME PORT TOKEN [NODE_ID]: a pstrain node with TOKEN ("" for none)
# that dials PORT as its scheduler; it must exit 1 within 10 s saying
# authentication failed (not retry until its connect timeout).
probe() {
  (
    if [ -n "$3" ]; then export MS_CLUSTER_TOKEN="$3"; else unset MS_CLUSTER_TOKEN; fi
    export MS_SCHED_PORT="$2"
    exec "$BIN" --role MS_WORKER --node-id "${4:-auth-$1}" > "$WORK/$1.log" 2>&1
  ) &
  echo $! > "$WORK/$1.pid"
  wait_exit "$1" 100
  [ "$status" = 1 ] || fail "$1: exit status $status, expected 1 at once"
  grep -q "authentication failed" "$WORK/$1.log" || fail "$1 does not say authentication failed"
}
# refused_in LOG CHECK: LOG has a line naming a source address and CHECK.
refused_in() {
  wait_for_count "authentication failed from 127.0.0.1:[0-9]*: .*$2" "$1" 1 50 ||
    fail "$1 names no refused source with '$2'"
}

# A node with another token is refused at the scheduler.
probe wrong_node "$SCHED_PORT" guess
refused_in "$(node_log scheduler)" "proof does not match MS_CLUSTER_TOKEN"
echo "ok: a node with another token is refused at the scheduler"

# The worker reaches the scheduler through the recording proxy.
python3 "$REPO/tests/tools/record_proxy.py" "$SCHED_PORT" "$WORK/proxy.port" "$WORK/capture.bin" \
  100 > "$WORK/proxy.log" 2>&1 &
echo $! > "$WORK/proxy.pid"
t=0
while [ ! -f "$WORK/proxy.port" ] && [ "$t" -lt 100 ]; do sleep 0.1; t=$((t + 1)); done
[ -f "$WORK/proxy.port" ] || fail "the proxy did not start"
start server_0
MS_SCHED_PORT=$(cat "$WORK/proxy.port") start worker_0
wait_for_count "assign rank id" "$(node_log scheduler)" 2 300 || fail "the nodes did not register"
port_of() {
  sed -n "s/.*The $1 node id:.*node port:\([0-9]*\) assign rank id:0.*/\1/p" "$(node_log scheduler)" |
    tail -n 1
}
SERVER_PORT=$(port_of server)
WORKER_PORT=$(port_of worker)
[ -n "$SERVER_PORT" ] && [ -n "$WORKER_PORT" ] || fail "no node ports in the scheduler log"

# A stranger registering with a live node's id cannot evict it.
probe evict "$SCHED_PORT" guess auth-worker_0
alive worker_0 || fail "a stranger with worker 0's node id evicted it"

# Clients with another token, or none, at the server's and the worker's port.
probe at_server "$SERVER_PORT" guess
refused_in "$(node_log server_0)" "proof does not match MS_CLUSTER_TOKEN"
probe at_worker "$WORKER_PORT" guess
refused_in "$(node_log worker_0)" "proof does not match MS_CLUSTER_TOKEN"
probe none_at_server "$SERVER_PORT" ""
refused_in "$(node_log server_0)" "peer sent no proof but MS_CLUSTER_TOKEN is set"
echo "ok: clients with another token or none are refused at the server's and the worker's port"

# A slowloris at the server's port: one byte a second.
held=$(python3 - "$SERVER_PORT" << 'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.settimeout(1.0)
start = time.monotonic()
while time.monotonic() - start < 20:
    try:
        s.send(b"P")
        if s.recv(4096) == b"" and time.monotonic() - start > 0.5:
            break
    except socket.timeout:
        continue
    except OSError:
        break
print("%.1f" % (time.monotonic() - start))
PY
)
echo "slowloris held for $held s (PSTRAIN_HANDSHAKE_TIMEOUT=2)"
awk -v h="$held" 'BEGIN { exit !(h >= 1.5 && h <= 5) }' || fail "a slowloris was held $held s"
refused_in "$(node_log server_0)" "no handshake within 2.0 s"
echo "ok: a one-byte-a-second peer is dropped within the handshake deadline"

# Worker 1 completes the job, which trains to its end.
start worker_1
for n in worker_0 worker_1 server_0 scheduler; do
  wait_exit "$n" 1200
  [ "$status" = 0 ] || fail "$n: exit status $status"
done
grep -q "epoch: 2 step:" "$(node_log worker_0)" || fail "worker 0 did not train 2 epochs"
echo "ok: the job with a token trained to the end"

# The token never crossed the wire; the capture did see the registration.
[ -s "$WORK/capture.bin" ] || fail "the proxy captured nothing"
grep -a -q "auth-worker_0" "$WORK/capture.bin" || fail "the capture lacks the worker's registration"
if grep -a -q -F "$TOKEN" "$WORK/capture.bin"; then fail "the token is on the wire"; fi
echo "ok: $(wc -c < "$WORK/capture.bin") bytes captured between the worker and the scheduler, no token"
echo "PASSED"
