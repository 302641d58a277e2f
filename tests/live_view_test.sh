#!/bin/sh
# Live view: a 1-server, 2-worker sync Wide&Deep job, separate
# processes on 127.0.0.1, with PSTRAIN_HTTP_PORT set on the scheduler. While
# it trains: /status is JSON listing the 3 nodes with roles, ranks and worker
# steps > 0; /metrics has the pstrain_ series (and passes `promtool check
# metrics` where promtool is installed); hostile requests are refused; the
# job still finishes with exit 0 everywhere.
# Usage: sh tests/live_view_test.sh PSTRAIN_BIN
set -u
BIN="$1"
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
. "$REPO/tests/cluster_util.sh"
trap 'cluster_cleanup; rm -rf "$WORK"' EXIT
trap "exit 1" HUP INT TERM PIPE
command -v curl > /dev/null || { echo "skipped: curl is not installed"; exit 77; }
command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }

export MS_SERVER_NUM=1 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1 ID_PREFIX=live
gen_criteo "$WORK/data" 20000
job_config wide_deep "$WORK/data" 40 - > "$WORK/job.yaml"
export PSTRAIN_CONFIG="$WORK/job.yaml"
HTTP=$(( $(pick_port 7) + 1 ))
PSTRAIN_HTTP_PORT=$HTTP start_scheduler
grep -q "serves the job's state on http://127.0.0.1:$HTTP/status" "$(node_log scheduler)" ||
  fail "no log line with the live view's URL"
URL="http://127.0.0.1:$HTTP"
for n in server_0 worker_0 worker_1; do start $n; done

# 1. /status during training: every node, and workers that have stepped.
t=0
until curl -s -m 2 "$URL/status" > "$WORK/status.json" &&
  python3 - "$WORK/status.json" << 'PY'
import json, sys
s = json.load(open(sys.argv[1]))
nodes = [(n["role"], n["rank"]) for n in s["nodes"]]
assert sorted(nodes) == [("server", 0), ("worker", 0), ("worker", 1)], nodes
assert all(n["state"] == "running" for n in s["nodes"]), s["nodes"]
assert all(n["step"] and n["step"] > 0 for n in s["nodes"] if n["role"] == "worker")
assert s["totals"]["min_step"] > 0 and s["job"]["workers"] == 2
PY
do
  t=$((t + 1))
  [ "$t" -lt 300 ] || fail "/status never showed 3 running nodes with worker steps > 0: $(cat "$WORK/status.json")"
  sleep 0.1
done
echo "live_view: /status ok: $(tr -d '\n ' < "$WORK/status.json" | cut -c1-200)"

# 2. /metrics: the series a dashboard needs.
curl -s -m 2 -D "$WORK/metrics.head" "$URL/metrics" > "$WORK/metrics.txt" || fail "/metrics"
grep -qi "content-type: text/plain; version=0.0.4" "$WORK/metrics.head" || fail "/metrics content type"
for series in 'pstrain_nodes{role="worker",state="running"} 2' \
  'pstrain_node_heartbeat_age_seconds{role="server",rank="0"}' \
  'pstrain_worker_step{role="worker",rank="1"}' \
  'pstrain_worker_samples_per_second{role="worker",rank="0"}' '# TYPE pstrain_worker_step gauge'; do
  grep -qF "$series" "$WORK/metrics.txt" || fail "/metrics lacks $series"
done
if command -v promtool > /dev/null; then
  promtool check metrics < "$WORK/metrics.txt" || fail "promtool check metrics"
  echo "live_view: promtool check metrics passed"
else
  echo "live_view: promtool not installed (Debian package prometheus): its check skipped"
fi

# LIVE_OUT=DIR keeps the pages for a look.
[ -n "${LIVE_OUT:-}" ] && cp "$WORK/status.json" "$WORK/metrics.txt" "$LIVE_OUT/"

# 3. Hostile requests: refused, and the scheduler goes on.
code() { curl -s -m 5 -o /dev/null -w '%{http_code}' "$@"; }
[ "$(code "$URL/nothing")" = 404 ] || fail "an unknown path is not 404"
[ "$(code -X POST "$URL/status")" = 405 ] || fail "POST is not 405"
big=$(head -c 102400 /dev/zero | tr '\0' a)
printf 'X-Big: %s\r\n' "$big" > "$WORK/big.hdr"
[ "$(code -H @"$WORK/big.hdr" "$URL/status")" = 431 ] || fail "a 100 KiB header is not 431"
bad=$(printf 'GARBAGE\r\n\r\n' | python3 -c "
import socket, sys
s = socket.create_connection(('127.0.0.1', $HTTP), timeout=5)
s.sendall(sys.stdin.buffer.read()); print(s.recv(64).decode().split('\r\n')[0])")
case "$bad" in "HTTP/1.1 400"*) ;; *) fail "a bad request line got '$bad', not 400" ;; esac
# A silent connection is closed by the deadline (5 s), and 200 at once are
# either served or closed: none hangs, and /status still answers.
python3 - "$HTTP" << 'PY' || fail "silent or flooding connections were not closed in time"
import socket, sys, time
port = int(sys.argv[1])
silent = socket.create_connection(("127.0.0.1", port), timeout=10)
begin = time.time()
flood = []
for _ in range(200):
    try:
        flood.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    except OSError:
        pass
assert silent.recv(1) == b"" and time.time() - begin < 9, "the silent connection stayed open"
for c in flood:
    c.settimeout(10)
    try:
        c.recv(1)  # closed: at once over the cap, else by the deadline
    except ConnectionResetError:
        pass
PY
[ "$(code "$URL/status")" = 200 ] || fail "/status stopped answering after the hostile requests"
grep -q "HTTP: 32 connections are open" "$(node_log scheduler)" || fail "the connection cap was never logged"

for n in scheduler server_0 worker_0 worker_1; do
  wait_exit $n 1200
  [ "$status" = 0 ] || fail "$n ended with $status, not 0"
done
echo "live_view: passed"
