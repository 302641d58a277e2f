#!/bin/sh
# Memory for a frame is taken only as its bytes arrive: many
# sockets to the scheduler, each sending a fixed header that announces a
# 1 MiB FlatBuffers header and then a little of it, may grow the
# scheduler's resident memory by at most a bound (it zero-filled 1 MiB per
# socket before: 1.9 GB for 2000), and the scheduler must still run a job
# after. Then a push announcing 2 GiB, under a memory limit, with 20 bytes
# sent, costs about 20 bytes. The bound is on the growth: an idle scheduler's own RSS depends on
# the build (libraries mapped), not on what peers send.
# Usage: sh tests/frame_memory_test.sh PSTRAIN_BIN [SOCKETS] [BOUND_MB]
set -u
BIN="$1"
SOCKETS="${2:-2000}"
BOUND_MB="${3:-64}"
WORK=$(mktemp -d)
ID_PREFIX=framemem
. "$(dirname "$0")/cluster_util.sh"
trap 'cluster_cleanup; rm -rf "$WORK"' EXIT
command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }
# The scheduler and the client each hold a descriptor per socket.
ulimit -n $((SOCKETS + 512)) 2> /dev/null ||
  { echo "skipped: cannot open $SOCKETS sockets (ulimit -n)"; exit 77; }

export MS_SCHED_HOST=127.0.0.1 MS_SERVER_NUM=0 MS_WORKER_NUM=1
# The job after the flood: a worker needs a model (tiny, on the worker alone).
. "$(dirname "$0")/tiny_job.sh"
PSTRAIN_CONFIG=$(tiny_job "$BIN" "$WORK/data" allreduce) || fail "gen criteo"
export PSTRAIN_CONFIG
export PSTRAIN_REGISTER_TIMEOUT=60
start_scheduler
pid=$(node_pid scheduler)
rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status"; }
before=$(rss_kb)

# Opens the sockets, sends each its bytes, holds them open until told (a
# line on stdin), and reports how many it opened.
python3 - "$MS_SCHED_PORT" "$SOCKETS" > "$WORK/client.out" 2>&1 <<'PY' &
import socket, struct, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
fixed = b"PSTR" + struct.pack("<HHIQ", 1, 0, 1 << 20, 0)  # a 1 MiB header, no payload
socks = []
deadline = time.time() + 60
for i in range(n):
    if time.time() > deadline:
        break
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(fixed + bytes(1000))  # and the first 1000 bytes of it
        socks.append(s)
    except OSError as e:
        print("socket", i, e)
        break
print("opened", len(socks), flush=True)
time.sleep(30)  # killed by the test once measured
PY
client=$!
t=0
until grep -q "^opened" "$WORK/client.out" || [ "$t" -ge 600 ]; do sleep 0.1; t=$((t + 1)); done
opened=$(sed -n 's/^opened //p' "$WORK/client.out")
[ -n "$opened" ] || fail "the client did not report (see $WORK/client.out): $(cat "$WORK/client.out")"
sleep 1  # the scheduler reads what was sent
alive scheduler || fail "the scheduler died under $opened sockets"
during=$(rss_kb)
kill "$client" 2> /dev/null
wait "$client" 2> /dev/null
grew=$((during - before))
echo "frame_memory: $opened sockets announcing 1 MiB headers: scheduler RSS ${before} kB -> ${during} kB (+${grew} kB, bound ${BOUND_MB} MB)"
[ "$opened" -ge $((SOCKETS / 2)) ] || fail "only $opened of $SOCKETS sockets opened"
[ "$grew" -le $((BOUND_MB * 1024)) ] || fail "scheduler RSS grew by ${grew} kB, over ${BOUND_MB} MB"

# It still serves: a worker registers and the job (no servers, a tiny model) ends.
start worker_0
wait_exit worker_0 300
[ "$status" = 0 ] || fail "the worker after the flood ended with $status"
wait_exit scheduler 100
[ "$status" = 0 ] || fail "the scheduler ended with $status"

# A push announcing 2 GiB under an address-space limit of 1.5 GB (the idle
# scheduler maps about 1 GB) with 20 bytes of it sent: it costs about those
# bytes, the node stays up (it aborted with std::bad_alloc, exit 134).
PUSH_HEADER=14000000000000000c0018000c000000070008000c0000000000000b1c0000000100000000000000000000000c00100004000000000008000c0000000c00000001000000000000000a0000006663312e7765696768740000
RUN=limited
attempt=10
until [ "$attempt" -ge 15 ]; do
  port=$(pick_port "$attempt")
  (ulimit -v 1500000; MS_ROLE=MS_SCHED MS_SCHED_PORT=$port exec "$BIN") > "$(node_log scheduler)" 2>&1 &
  echo $! > "$WORK/limited.pid"
  wait_for_count "listens on" "$(node_log scheduler)" 1 100 && break
  kill -9 "$(node_pid limited)" 2> /dev/null
  attempt=$((attempt + 1))
done
alive limited || fail "the scheduler under ulimit -v 1500000 did not start"
pid=$(node_pid limited)
before=$(rss_kb)
python3 - "$port" "$PUSH_HEADER" > "$WORK/push.out" 2>&1 <<'PY' &
import socket, struct, sys, time
port, header = int(sys.argv[1]), bytes.fromhex(sys.argv[2])
fixed = b"PSTR" + struct.pack("<HHIQ", 1, 0, len(header), 2 << 30)
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(fixed + header + bytes(20))
print("sent", flush=True)
time.sleep(30)  # killed by the test once measured
PY
client=$!
wait_for_count "^sent" "$WORK/push.out" 1 100 || fail "the push client did not send: $(cat "$WORK/push.out")"
sleep 1
alive limited || fail "the scheduler died of a 2 GiB announcement (see its log)"
grew=$(($(rss_kb) - before))
kill "$client" 2> /dev/null
wait "$client" 2> /dev/null
echo "frame_memory: a 2 GiB push announced, 20 bytes sent, under ulimit -v 1500000: RSS +${grew} kB"
[ "$grew" -le 4096 ] || fail "a 2 GiB announcement with 20 bytes sent grew RSS by ${grew} kB"
grep -q "verification" "$(node_log scheduler)" && fail "the push header no longer decodes: update PUSH_HEADER"
echo "frame_memory: passed"
