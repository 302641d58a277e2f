#!/bin/sh
# A node out of file descriptors says so: a scheduler started with
# `ulimit -n 48` gets 80 connections held open at once. Past its limit
# libuv drops each new connection without a word (its EMFILE trick); the
# scheduler must log one line saying it is out of descriptors and naming the
# limit, not one per connection, keep running, and say when it has
# descriptors again once the connections are gone; then it accepts again.
# Usage: sh tests/descriptor_test.sh PSTRAIN_BIN
set -u
BIN="$1"
WORK=$(mktemp -d)
. "$(dirname "$0")/cluster_util.sh"
trap 'cluster_cleanup; rm -rf "$WORK"' EXIT
trap "exit 1" HUP INT TERM
command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }
export MS_SERVER_NUM=1 MS_WORKER_NUM=1 MS_SCHED_HOST=127.0.0.1 PSTRAIN_MAX_HANDSHAKING=1000
export PSTRAIN_REGISTER_TIMEOUT=120
(ulimit -n 48 && start_scheduler && wait_for_count "listens on" "$(node_log scheduler)" 1) ||
  fail "the scheduler did not start with ulimit -n 48"
# start_scheduler ran in the subshell: its port and pid are in the files.
port=$(sed -n 's/.*listens on 127.0.0.1:\([0-9]*\).*/\1/p' "$(node_log scheduler)")

python3 - "$port" << 'PY' || fail "the connections could not be made"
import socket, sys, time
port = int(sys.argv[1])
held = []
for _ in range(80):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except OSError:
        pass
time.sleep(3)  # the scheduler checks every second
for s in held:
    s.close()
PY
wait_for_count "file descriptors are available again" "$(node_log scheduler)" 1 50 ||
  fail "the scheduler did not say it has descriptors again"
alive scheduler || fail "the scheduler died when out of descriptors"
out=$(count "out of file descriptors" "$(node_log scheduler)")
[ "$out" = 1 ] || fail "$out lines about running out of descriptors, expected 1"
grep -q "this process is out of file descriptors (EMFILE, its limit is 48: ulimit -n)" \
  "$(node_log scheduler)" || fail "the line does not name the limit"
echo "  $(grep -m 1 "out of file descriptors" "$(node_log scheduler)" | cut -c 1-240)"
python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2)" \
  "$port" || fail "the scheduler does not accept connections any more"
echo "descriptor_test: passed"
