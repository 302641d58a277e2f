#!/bin/sh
# Chaos (issue 12): a 2-server, 2-worker sync job, started as separate
# processes as the launch scripts do, checkpointing every few steps. While it
# trains, a node chosen at random is killed with SIGKILL KILLS times, at
# random moments (checkpoint writes included), and started again with its
# MS_NODE_ID and MS_NODE_RANK, as a supervisor (Kubernetes, systemd, Slurm
# --requeue) would. Checked: every process of the last incarnation exits 0,
# the scheduler logged each loss and each resume, and the final checkpoint
# (every parameter, optimizer state, table row and worker place) is byte for
# byte that of the same job run with no kills.
#
# SCENARIO: lenet (LeNet on a slice of Fashion-MNIST; skipped without it),
# wide_deep (tables on the servers, generated click data), scheduler (the
# wide_deep job, killing the scheduler instead and starting it again on its
# port), or sigterm (the wide_deep job; each "kill" is a SIGTERM to a random
# node: every process must exit 3, and the job is started again, resuming).
# Usage: sh tests/chaos_test.sh PSTRAIN_BIN SCENARIO [KILLS] [SEED]
set -u
BIN="$1"
SCENARIO="$2"
KILLS="${3:-5}"
SEED="${4:-$$}"
WORK=$(mktemp -d)
FMNIST=/usr/share/datasets/fashion-mnist
cleanup() {
  for p in "$WORK"/*.pid; do [ -f "$p" ] && kill -9 "$(cat "$p")" 2> /dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
[ -n "${CHAOS_KEEP:-}" ] && trap - EXIT
echo "chaos_test: $SCENARIO, $KILLS kills, seed $SEED, in $WORK"

fail() {
  echo "FAILED: $*"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -n 15 "$f"; done
  exit 1
}
# rand K: a number from 0 to 9999, the K-th of this seed.
rand() { awk -v s="$SEED" -v k="$1" 'BEGIN { srand(s * 100 + k); printf "%d", rand() * 10000 }'; }

command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }
case "$SCENARIO" in
  lenet)
    [ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || {
      echo "skipped: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
      exit 77
    }
    ;;
  wide_deep | scheduler | sigterm)
    "$BIN" gen criteo --rows 8000 --shards 2 --test-rows 0 --out "$WORK/data" > "$WORK/gen.out" 2>&1 ||
      fail "gen criteo"
    ;;
  *) echo "unknown scenario '$SCENARIO'"; exit 2 ;;
esac

# config DIR: the job, checkpointing into DIR.
config() {
  if [ "$SCENARIO" = lenet ]; then
    cat <<EOF
model:
  input: [1, 28, 28]
  loss: softmax_cross_entropy
  layers:
    - {name: conv1, type: conv2d, out_channels: 6, kernel: 5, padding: 2}
    - relu
    - {type: maxpool, kernel: 2}
    - {name: conv2, type: conv2d, out_channels: 16, kernel: 5}
    - relu
    - {type: maxpool, kernel: 2}
    - flatten
    - {name: fc1, type: linear, out: 120}
    - relu
    - {name: fc3, type: linear, out: 10}
data:
  format: idx
  train: [$FMNIST/train-images-idx3-ubyte.gz, $FMNIST/train-labels-idx1-ubyte.gz]
  limit: 4096
train:
  epochs: 8
  batch_size: 16
  mode: sync
  optimizer: {type: momentum, lr: 0.02, momentum: 0.9}
  seed: 3
  log_every: 1000
  checkpoint: {dir: $1, every_steps: 16, keep: 3, resume: true}
parameters:
  - {match: "conv*", ps: true}
  - {match: "fc*", ps: false}
EOF
  else
    cat <<EOF
model:
  input: [13]
  sparse_fields: 26
  loss: bce_with_logits
  wide:
    - {name: wide_emb, type: embedding_bag, vocab: 65536, dim: 1, mode: sum, init: zeros}
  deep:
    - {name: deep_emb, type: embedding_bag, vocab: 65536, dim: 8, mode: concat, init: normal,
       init_scale: 0.05}
    - concat
    - {name: fc1, type: linear, out: 32}
    - relu
    - {name: fc2, type: linear, out: 1}
data:
  format: criteo
  train: [$WORK/data/train.txt]
  vocab: 65536
train:
  epochs: $EPOCHS
  batch_size: 16
  mode: sync
  optimizer: {type: adam, lr: 0.001}
  seed: 1
  log_every: 1000
  checkpoint: {dir: $1, every_steps: 16, keep: 3, resume: true}
parameters:
  - {match: "wide_emb.weight", ps: true, init_in_server: true, optimizer: {type: adagrad, lr: 1.0}}
  - {match: "deep_emb.weight", ps: true, init_in_server: true, optimizer: {type: adagrad, lr: 0.05}}
  - {match: "fc2*", ps: true}
  - {match: "fc*", ps: false}
EOF
  fi
}

# Killing the scheduler costs the job little time: its kills need more steps.
EPOCHS=8
[ "$SCENARIO" = scheduler ] && EPOCHS=24
export MS_SERVER_NUM=2 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1
export PSTRAIN_CONNECT_TIMEOUT=60 PSTRAIN_HEARTBEAT_TIMEOUT=10
NODES="server_0 server_1 worker_0 worker_1"

# start NAME: one process of the job in $RUN, appending to NAME.log; the
# node id and rank come from the name, so a restart is the same node.
start() {
  case "$1" in
    scheduler) role=MS_SCHED ;;
    server_*) role=MS_PSERVER ;;
    worker_*) role=MS_WORKER ;;
  esac
  (
    export MS_ROLE=$role MS_NODE_ID="chaos-$1"
    if [ "$1" != scheduler ]; then export MS_NODE_RANK="${1#*_}"; fi
    exec "$BIN" >> "$WORK/$RUN-$1.log" 2>&1
  ) &
  echo $! > "$WORK/$1.pid"
}
alive() { kill -0 "$(cat "$WORK/$1.pid")" 2> /dev/null; }
# count PATTERN FILE
count() { grep -c "$1" "$2" 2> /dev/null || true; }
# wait_for_count PATTERN FILE N: at most 60 s for N lines matching (the
# scheduler: less, once it has ended).
wait_for_count() {
  t=0
  while [ "$(count "$1" "$2")" -lt "$3" ] && [ "$t" -lt 600 ]; do
    sleep 0.1
    t=$((t + 1))
  done
  [ "$(count "$1" "$2")" -ge "$3" ]
}
# wait_all [STATUS]: every process of the current incarnation ends (at most
# 300 s); fails unless each exits STATUS (default 0).
wait_all() {
  for n in scheduler $NODES; do
    pid=$(cat "$WORK/$n.pid")
    t=0
    while kill -0 "$pid" 2> /dev/null && [ "$t" -lt 3000 ]; do sleep 0.1; t=$((t + 1)); done
    kill -0 "$pid" 2> /dev/null && fail "$RUN: $n still runs after 300 s"
    wait "$pid"
    rc=$?
    [ "$rc" = "${1:-0}" ] || fail "$RUN: $n exited $rc, expected ${1:-0}"
  done
}

# run_job RUN: starts the scheduler on a free port (below the ephemeral
# range; another is tried when the port is taken), then the nodes.
run_job() {
  RUN=$1
  config "$WORK/ckpt-$RUN" > "$WORK/$RUN.yaml"
  export PSTRAIN_CONFIG="$WORK/$RUN.yaml"
  try=0
  while :; do
    try=$((try + 1))
    export MS_SCHED_PORT=$((10000 + ($(rand "$((try + 90))") + $$) % 20000))
    start scheduler
    t=0
    while ! grep -q "listens on" "$WORK/$RUN-scheduler.log" 2> /dev/null && alive scheduler &&
      [ "$t" -lt 600 ]; do
      sleep 0.1
      t=$((t + 1))
    done
    grep -q "listens on" "$WORK/$RUN-scheduler.log" && break
    alive scheduler && fail "$RUN: the scheduler neither listens nor ends"
    [ "$try" -lt 5 ] || fail "$RUN: no free port for the scheduler in 5 tries"
  done
  for n in $NODES; do start "$n"; done
}

RUN=clean
run_job clean
wait_all
echo "clean run: done"

run_job chaos
sched_log="$WORK/chaos-scheduler.log"
# A node killed before the job starts loses nothing: the first kill waits
# for training to begin.
wait_for_count "worker 0 trains" "$WORK/chaos-worker_0.log" 1 || fail "chaos: training never began"
k=0
while [ "$k" -lt "$KILLS" ]; do
  k=$((k + 1))
  # Each kill lands while the job trains: after the previous recovery, at a
  # random moment 0.2 to 1.2 s later (not a wait for a condition: the random
  # moment is the test).
  sleep "$(awk -v r="$(rand "$k")" 'BEGIN { printf "%.2f", 0.2 + r / 10000 }')"
  if [ "$SCENARIO" = scheduler ]; then
    victim=scheduler
  elif [ "$SCENARIO" = sigterm ]; then
    set -- scheduler $NODES
    shift "$(($(rand "$((k + 50))") % 5))"
    victim=$1
  else
    set -- $NODES
    shift "$(($(rand "$((k + 50))") % 4))"
    victim=$1
  fi
  alive "$victim" || fail "chaos: $victim ended before kill $k (the job finished too soon?)"
  if [ "$SCENARIO" = sigterm ]; then
    kill -TERM "$(cat "$WORK/$victim.pid")"
    wait_all 3
    grep -q "stopped on request after step" "$WORK/chaos-worker_0.log" ||
      fail "sigterm: worker 0 did not log where it stopped"
    echo "stop $k: SIGTERM to $victim; every process exited 3"
    for n in scheduler $NODES; do start "$n"; done
    wait_for_count "worker 0 trains" "$WORK/chaos-worker_0.log" "$((k + 1))" ||
      fail "sigterm: the job did not start again"
    continue
  fi
  kill -9 "$(cat "$WORK/$victim.pid")"
  wait "$(cat "$WORK/$victim.pid")" 2> /dev/null
  echo "kill $k: $victim"
  start "$victim"
  if [ "$SCENARIO" = scheduler ]; then
    wait_for_count "re-joined the restarted scheduler" "$WORK/chaos-worker_0.log" "$k" ||
      fail "chaos: worker 0 did not rejoin the restarted scheduler after kill $k"
  else
    wait_for_count "the job resumes" "$sched_log" "$k" ||
      fail "chaos: the job did not resume within 60 s of kill $k"
  fi
done
wait_all
echo "chaos run: done"
if [ "$SCENARIO" != scheduler ] && [ "$SCENARIO" != sigterm ]; then
  [ "$(count "lost the" "$sched_log")" -ge "$KILLS" ] || fail "the scheduler logged fewer losses than kills"
fi

# The final checkpoint of both runs, file by file.
last=$(ls -d "$WORK/ckpt-clean"/step-* | tail -n 1)
step=$(basename "$last")
files=$(ls "$last")
[ -n "$files" ] || fail "the clean run wrote no final checkpoint"
SAME="$(dirname "$0")/tools/ckpt_same.py"
for f in $files; do
  case "$f" in
    # Table rows are listed in the order workers' lookups met (see the tool).
    server-*.ckpt) python3 "$SAME" "$last/$f" "$WORK/ckpt-chaos/$step/$f" ;;
    MANIFEST) true ;;  # it holds the CRCs of the files, compared above
    *) cmp -s "$last/$f" "$WORK/ckpt-chaos/$step/$f" ;;
  esac || fail "$step/$f differs between the clean run and the one killed $KILLS times"
done
echo "chaos_test: passed ($SCENARIO: $KILLS kills; $(echo $files | wc -w) files of $step identical)"
