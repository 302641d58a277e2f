#!/bin/sh
# End-to-end: launch/Scheduler.sh, Server.sh and Worker.sh start a job of 2
# servers and 2 workers on 127.0.0.1; every process must exit 0, the
# workers must have trained, and the logs must carry the lines users grep
# for. First, with a stand-in binary, what each process is given: its rank
# to ask for, its node id and the job's config (the repository's LeNet
# config when the caller sets none: a worker without a model exits 2).
# Usage: sh tests/launch_test.sh PSTRAIN_BIN
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
unset PSTRAIN_CONFIG MS_NODE_ID MS_NODE_RANK
. "$(dirname "$0")/tiny_job.sh"
export MS_SCHED_HOST=127.0.0.1 PSTRAIN_CONNECT_TIMEOUT=30

# wait_exit NAME: waits (at most 60 s) for NAME.exit and prints it.
wait_exit() {
  n=0
  while [ ! -s "$WORK/$1.exit" ] && [ "$n" -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
  cat "$WORK/$1.exit" 2>/dev/null || echo "none"
}

# wait_exit_in DIR NAME: as wait_exit, for the stand-in's runs in DIR.
wait_exit_in() {
  n=0
  while [ ! -s "$1/$2.exit" ] && [ "$n" -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
  cat "$1/$2.exit" 2>/dev/null || echo "none"
}

# The stand-in prints what the scripts gave it. A shared MS_NODE_ID must give
# a server and a worker different ids (it once gave both <id>-0, and the
# scheduler refused the worker), and MS_NODE_RANK must follow the log name.
FAKE="$WORK/fake"
mkdir "$FAKE"
printf '#!/bin/sh\necho "role=$MS_ROLE rank=${MS_NODE_RANK-unset} id=${MS_NODE_ID-unset} config=${PSTRAIN_CONFIG-unset}"\n' \
  > "$FAKE/pstrain"
chmod +x "$FAKE/pstrain"
(
  export PSTRAIN_BIN="$FAKE/pstrain" PSTRAIN_LOG_DIR="$FAKE" MS_NODE_ID=job MS_SCHED_PORT=1
  MS_NODE_RANK=7 sh "$REPO/launch/Scheduler.sh"  # one left in the user's shell
  sh "$REPO/launch/Server.sh"
  sh "$REPO/launch/Worker.sh"
  PSTRAIN_FIRST_INDEX=2 PSTRAIN_LOCAL_WORKERS=1 sh "$REPO/launch/Worker.sh"
  PSTRAIN_FIRST_INDEX=3 PSTRAIN_LOCAL_WORKERS=1 PSTRAIN_CONFIG=/my/job.yaml sh "$REPO/launch/Worker.sh"
) > /dev/null
for name in scheduler server_0 server_1 worker_0 worker_1 worker_2 worker_3; do wait_exit_in "$FAKE" "$name" > /dev/null; done
expect_given() {  # NAME LINE: NAME.log is exactly LINE
  check "$1 is given '$2' (got '$(cat "$FAKE/$1.log" 2>/dev/null)')" [ "$(cat "$FAKE/$1.log" 2>/dev/null)" = "$2" ]
}
DEFAULT_CONFIG="$REPO/configs/lenet_fashion_mnist.yaml"
expect_given scheduler "role=MS_SCHED rank=unset id=job config=$DEFAULT_CONFIG"
expect_given server_0 "role=MS_PSERVER rank=0 id=job-server-0 config=$DEFAULT_CONFIG"
expect_given server_1 "role=MS_PSERVER rank=1 id=job-server-1 config=$DEFAULT_CONFIG"
expect_given worker_0 "role=MS_WORKER rank=0 id=job-worker-0 config=$DEFAULT_CONFIG"
expect_given worker_1 "role=MS_WORKER rank=1 id=job-worker-1 config=$DEFAULT_CONFIG"
expect_given worker_2 "role=MS_WORKER rank=2 id=job-worker-2 config=$DEFAULT_CONFIG"
expect_given worker_3 "role=MS_WORKER rank=3 id=job-worker-3 config=/my/job.yaml"
check "the default config is there" [ -f "$DEFAULT_CONFIG" ]

# The real job, with a shared MS_NODE_ID as a user may export, on a tiny
# config (the default trains LeNet for minutes).
export MS_NODE_ID=launch-test
PSTRAIN_CONFIG=$(tiny_job "$BIN" "$WORK/data") || { echo "FAILED: gen criteo"; exit 1; }
export PSTRAIN_CONFIG

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
for role in server worker; do
  for i in 0 1; do
    check "scheduler registers $MS_NODE_ID-$role-$i as a $role" \
      grep -q "The $role node id:$MS_NODE_ID-$role-$i," "$log"
  done
done
for name in server_0 server_1 worker_0 worker_1; do
  check "$name registered" grep -q "registered with the scheduler at 127.0.0.1:$MS_SCHED_PORT" "$WORK/$name.log"
  check "$name stopped cleanly" grep -q "stops: the job is over" "$WORK/$name.log"
  # Once it has joined, each line names role and rank: the rank it joined as.
  role=${name%_*}
  rank=$(sed -n "s/.* $role rank \([0-9]*\) joined a job.*/\1/p" "$WORK/$name.log")
  check "$name says which rank it joined as" [ -n "$rank" ]
  check "$name labels its lines [$role $rank] from then on" \
    awk -v label="] [$role $rank] [" '/ joined a job / { on = 1 } on && index($0, label) == 0 { bad = 1 }
      END { exit !(on && !bad) }' "$WORK/$name.log"
  check "$name is labelled [$role] before it joins" grep -q "] \[$role\] \[" "$WORK/$name.log"
done
# Exit 0 means the model was trained: each worker ran the config's 4 steps.
for rank in 0 1; do
  check "worker_$rank trained" grep -q "epoch: 1 step: 1, loss is" "$WORK/worker_$rank.log"
  check "worker_$rank finished its 4 steps" grep -q "worker $rank finished 4 steps" "$WORK/worker_$rank.log"
done

if [ "$failed" -gt 0 ]; then
  for f in "$WORK"/*.log; do echo "== $f"; cat "$f"; done
fi
echo "launch_test: $passed passed, $failed failed"
[ "$failed" = 0 ]
