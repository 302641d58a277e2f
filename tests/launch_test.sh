#!/bin/sh
# End-to-end: launch/Scheduler.sh, Server.sh and Worker.sh start a job of 2
# servers and 2 workers on 127.0.0.1; every process must exit 0 and the logs
# must carry the lines users grep for. Usage: sh tests/launch_test.sh PSTRAIN_BIN
set -u
BIN="$1"
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'kill $(cat "$WORK"/*.pid 2>/dev/null) 2>/dev/null; rm -rf "$WORK"' EXIT
passed=0
failed=0
check() {  # description, then a command that must succeed
  desc="$1"; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $desc"; fi
}

export PSTRAIN_BIN="$BIN" PSTRAIN_LOG_DIR="$WORK" MS_SERVER_NUM=2 MS_WORKER_NUM=2
export MS_SCHED_HOST=127.0.0.1 PSTRAIN_CONNECT_TIMEOUT=30

# wait_exit NAME: waits (at most 60 s) for NAME.exit and prints it.
wait_exit() {
  n=0
  while [ ! -s "$WORK/$1.exit" ] && [ "$n" -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
  cat "$WORK/$1.exit" 2>/dev/null || echo "none"
}

# A port that another test may hold: retry the scheduler on another one.
attempt=0
while :; do
  export MS_SCHED_PORT=$((20000 + ($$ * 7 + attempt * 131) % 40000))
  sh "$REPO/launch/Scheduler.sh" > /dev/null
  # The scheduler logs that it listens, or exits at once if the port is taken.
  n=0
  until grep -q "listens on" "$WORK/scheduler.log" 2>/dev/null || [ -s "$WORK/scheduler.exit" ] \
      || [ "$n" -ge 100 ]; do sleep 0.1; n=$((n + 1)); done
  if grep -q "listens on" "$WORK/scheduler.log" 2>/dev/null; then break; fi
  attempt=$((attempt + 1))
  if [ "$attempt" -ge 5 ]; then echo "FAILED: the scheduler never listened"; cat "$WORK/scheduler.log"; exit 1; fi
done

sh "$REPO/launch/Server.sh" > /dev/null
sh "$REPO/launch/Worker.sh" > /dev/null

for name in scheduler server_0 server_1 worker_0 worker_1; do
  status=$(wait_exit "$name")
  check "$name exits 0 (got $status)" [ "$status" = 0 ]
  check "$name.log exists" [ -s "$WORK/$name.log" ]
done

log="$WORK/scheduler.log"
for role in server worker; do
  for rank in 0 1; do
    check "scheduler assigns $role rank $rank" \
      grep -Eq "The $role node id:[^,]+,node ip: 127\.0\.0\.1,node port:[0-9]+ assign rank id:$rank\$" "$log"
  done
done
check "scheduler says it started" [ "$(grep -c 'Start the scheduler node is successful!$' "$log")" = 1 ]
for name in server_0 server_1 worker_0 worker_1; do
  check "$name registered" grep -q "registered with the scheduler at 127.0.0.1:$MS_SCHED_PORT" "$WORK/$name.log"
  check "$name stopped cleanly" grep -q "stops: the job is over" "$WORK/$name.log"
done

if [ "$failed" -gt 0 ]; then
  for f in "$WORK"/*.log; do echo "== $f"; cat "$f"; done
fi
echo "launch_test: $passed passed, $failed failed"
[ "$failed" = 0 ]
