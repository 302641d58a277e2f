#!/bin/sh
# What a change of an elastic job's shape costs (docs/elastic.md): for
# LeNet on Fashion-MNIST and for Wide&Deep on 1M generated rows, each
# started as 2 servers and 2 workers in separate processes on this machine:
# - join: from the scheduler's "registered while the job runs" line to the
#   new worker's first step, and the same for a server (to the first step
#   of worker 0 after the change): for a live change (workers of these sync
#   jobs, servers joining) the scheduler's "live change done", after which
#   the held workers go on; for a change through a checkpoint the first
#   "trains N steps" line after it;
# - leave: from SIGTERM to the process's exit, for a worker and a server
#   (the last one, and server 0 once another has joined: that one takes
#   rank 0); a worker killed with SIGKILL: from the scheduler's "was lost"
#   to every node back (the others finish its step without it);
# - bytes moved per server join: the checkpoint of the change's step (each
#   server's new shard is read back from it), or for a live join the
#   partitions' values the chief moved (their optimizer state besides);
# - throughput: the job's samples/s over the second after each change
#   (workers' metrics files) against the second before it.
# ELASTIC_BENCH_MODE=async or ssp (staleness 2) runs the jobs in that mode
# (sync when unset): a killed worker is then dropped at the furthest step
# the others reach. ELASTIC_BENCH_EPOCHS=N trains N epochs (a job that
# ends before its last change fails the run).
# Usage: sh tests/bench/elastic_bench.sh PSTRAIN_BIN [lenet|wide_deep]...
# Prints one line per figure; logs stay in a temporary folder it names.
set -u
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
SCENARIOS=${*:-lenet wide_deep}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
ID_PREFIX=bench
. "$REPO/tests/cluster_util.sh"
trap cluster_cleanup EXIT
echo "elastic_bench: logs in $WORK"
export MS_SCHED_HOST=127.0.0.1 PSTRAIN_CONNECT_TIMEOUT=60 PSTRAIN_HEARTBEAT_TIMEOUT=30

join() {
  case "$1" in server*) role=MS_PSERVER ;; *) role=MS_WORKER ;; esac
  (
    export MS_ROLE=$role MS_NODE_ID="$ID_PREFIX-$RUN-$1"
    exec "$BIN" >> "$(node_log "$1")" 2>&1
  ) &
  echo $! > "$WORK/$1.pid"
}
# ms FILE PATTERN [N]: the time of FILE's N-th line matching PATTERN (default the last).
ms() {
  stamp=$(grep "$2" "$1" | sed -n "${3:-\$}p" | sed -n 's/^\[\([0-9-]* [0-9:.]*\)\].*/\1/p')
  [ -n "$stamp" ] && date -d "$stamp" +%s%3N
}
# samples_per_s FROM_MS TO_MS: the job's training rate between two times,
# from the step lines of every worker's metrics file (one each log_every
# steps; a step is batch_size samples of each worker).
samples_per_s() {
  cat "$WORK"/metrics-worker-*.jsonl 2> /dev/null | python3 -c '
import json, sys
lo, hi, batch = int(sys.argv[1]) / 1000, int(sys.argv[2]) / 1000, int(sys.argv[3])
last, n = {}, 0
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("event") != "step":
        continue
    # The file of a rank may hold several processes one after the other (a
    # rank taken again after a leave): only a line close after the last,
    # in steps and time, counts.
    prev = last.get(m["rank"])
    if (prev is not None and 0 < m["step"] - prev[0] <= 100 and m["time"] - prev[1] < 5
            and lo <= m["time"] < hi):
        n += (m["step"] - prev[0]) * batch
    last[m["rank"]] = (m["step"], m["time"])
print(round(n / (hi - lo)))' "$1" "$2" "$BATCH"
}
SCHED() { node_log scheduler; }
# change N WHAT: waits for the N-th change, prints how long its pause took
# and the rate around it.
change() {
  wait_for_count "every node is back\|live change done" "$(SCHED)" "$1" 3000 ||
    fail "change $1 ($2) did not happen"
  asked=$(ms "$(SCHED)" "changing the job's\|was lost" "$1")
  back=$(ms "$(SCHED)" "every node is back\|live change done" "$1")
  sleep 4
  before=$(samples_per_s $((asked - 5000)) $((asked - 1000)))
  during=$(samples_per_s $((asked - 1000)) $((asked + 3000)))
  line=$(grep "elastic:" "$(SCHED)" | sed -n "${1}p" | sed 's/.*elastic: //' | cut -c 1-120)
  bytes=$(grep "checkpoint of step .* written to" "$(node_log worker_0)" | tail -n 1 | sed 's/.*(\(.*\)).*/\1/')
  echo "$RUN $2: $line"
  echo "  held from the scheduler's ask to every node back: $((back - asked)) ms;" \
    "samples/s: $before steady (the 4 s until 1 s before), $during over the 4 s from 1 s before;" \
    "last checkpoint: $bytes"
  if echo "$line" | grep -q "(live: partitions"; then
    echo "  moved live: $(grep "moved live" "$(node_log worker_0)" | tail -n 1 | sed 's/.*steps* [0-9]*: //')"
  fi
}

# join_then_leave ROLE N FIRST_LOG K: a ROLE joins (change N) and leaves
# on SIGTERM (change N+1); the join's time is from its registration to the
# K-th " trains " line of FIRST_LOG's node (its first step).
join_then_leave() {
  join "$1_2"
  change "$2" "$1 join"
  asked=$(ms "$(SCHED)" "registered while the job runs" $((($2 + 1) / 2)))
  if grep "elastic:" "$(SCHED)" | sed -n "${2}p" | grep -q "(live"; then
    first=$(ms "$(SCHED)" "live change done")
  else
    first=$(ms "$(node_log "$3")" " trains " "$4")
  fi
  echo "  join: $((first - asked)) ms from the $1's registration to $3's first step after it"
  sleep 2
  sent=$(now_ms)
  kill -TERM "$(node_pid "$1_2")"
  wait_exit "$1_2" 3000
  echo "  leave: $1 2 exited $status $(($(now_ms) - sent)) ms after SIGTERM"
  change $(($2 + 1)) "$1 leave"
}

for RUN in $SCENARIOS; do
  rm -f "$WORK"/*.pid "$WORK"/metrics-*.jsonl
  case $RUN in
    lenet)
      have_fmnist || continue
      sed -e '/^  log_every:/d' \
        -e "/^train:/a\\  log_every: 10\\n  checkpoint: {dir: $WORK/ckpt-lenet, every_steps: 1000}\\n  elastic: {workers: [1, 3], servers: [1, 3]}" \
        "$REPO/configs/lenet_fashion_mnist.yaml" > "$WORK/lenet.yaml"
      CONFIG=$WORK/lenet.yaml WARM=6 BATCH=64
      ;;
    wide_deep)
      # ELASTIC_BENCH_DATA: a folder of an earlier run's generated rows.
      [ -n "${ELASTIC_BENCH_DATA:-}" ] && cp -r "$ELASTIC_BENCH_DATA" "$WORK/criteo"
      [ -d "$WORK/criteo" ] || "$BIN" gen criteo --rows 1000000 --out "$WORK/criteo" > "$WORK/gen.out" 2>&1 ||
        fail "gen criteo"
      # One file, split by sample index among the workers.
      [ -f "$WORK/criteo/train.txt" ] || mv "$WORK/criteo/train.txt-00000" "$WORK/criteo/train.txt"
      sed -e "s|\.\./data/criteo|$WORK/criteo|g" -e '/^  log_every:/d' \
        -e "/^train:/a\\  log_every: 4\\n  checkpoint: {dir: $WORK/ckpt-wd, every_steps: 1000}\\n  elastic: {workers: [1, 3], servers: [1, 3]}" \
        "$REPO/configs/wide_deep_criteo.yaml" > "$WORK/wd.yaml"
      CONFIG=$WORK/wd.yaml WARM=15 BATCH=512
      ;;
  esac
  MODE=${ELASTIC_BENCH_MODE:-sync}
  sed -i "s/^  mode: sync.*/  mode: $MODE/" "$CONFIG"
  [ "$MODE" = ssp ] && sed -i "s/^  mode: ssp/  mode: ssp\n  staleness: 2/" "$CONFIG"
  grep -q "^  mode: $MODE" "$CONFIG" || fail "no mode $MODE in $CONFIG"
  [ -n "${ELASTIC_BENCH_EPOCHS:-}" ] && sed -i "s/^  epochs: [0-9]*/  epochs: $ELASTIC_BENCH_EPOCHS/" "$CONFIG"
  export PSTRAIN_CONFIG=$CONFIG MS_SERVER_NUM=2 MS_WORKER_NUM=2 PSTRAIN_LOG_DIR=$WORK
  start_scheduler
  for n in server_0 server_1 worker_0 worker_1; do start "$n"; done
  wait_for_count "trains" "$(node_log worker_0)" 1 3000 || fail "$RUN did not start"
  sleep "$WARM"
  join_then_leave worker 1 worker_2 1
  join_then_leave server 3 worker_0 4
  # Server 0 leaves after another joins: the joiner takes rank 0, live.
  join server_3
  change 5 "server join"
  sleep 2
  sent=$(now_ms)
  kill -TERM "$(node_pid server_0)"
  wait_exit server_0 3000
  echo "  leave: server 0 exited $status $(($(now_ms) - sent)) ms after SIGTERM (server 3 takes rank 0)"
  change 6 "server 0 leave"
  # A worker that joined is killed: the others finish its step without it
  # (async, ssp: go on without it from the furthest step).
  join worker_3
  change 7 "worker join"
  sleep 2
  kill -9 "$(node_pid worker_3)"
  change 8 "worker killed (SIGKILL)"
  for n in scheduler server_3 server_1 worker_0 worker_1; do
    wait_exit "$n" 6000
    [ "$status" = 0 ] || fail "$RUN: $n exited $status"
  done
  grep -hi "test accuracy\|test auc" "$(node_log worker_0)" | tail -n 1 | sed "s/^/  $RUN: /" | cut -c 1-160
done
