#!/bin/sh
# What replicated servers cost and save (docs/replication.md), on this
# machine, Fashion-MNIST:
# - throughput: LeNet (configs/lenet_fashion_mnist.yaml, 300 steps) with
#   `pstrain local`, 2 servers x 2 workers at replicas 0 and 1, and 3
#   servers x 2 workers at replicas 0, 1 and 2, each case run twice in
#   turns; worker 0's samples/s and the bytes the servers sent their
#   backups (their "replication: sent" lines) against the gradient bytes
#   the workers pushed (steps x workers x the model's PS bytes);
# - a kill: the same LeNet in separate processes, 3 servers x 2 workers,
#   replicas 1, a step logged each step; server 1 killed with SIGKILL at
#   step 150: milliseconds from the kill to the scheduler's "lost server",
#   and to worker 0's first step after it; the heir's re-replication line;
# - a large shard: an MLP whose servers hold about 53 MiB each (784 -> 8192
#   -> 4096 -> 10, sgd), replicas 1, server 1 killed at step 5: the
#   re-replication lines (bytes, seconds) of the servers left.
# - Wide&Deep (configs/wide_deep_criteo.yaml, sync, its two tables on the
#   servers) on 1M generated click rows, 300 steps, in the same shapes and
#   turns as LeNet: worker 0's samples/s and the bytes sent to backups;
# - a large table share: that Wide&Deep in processes, 3 servers x 2
#   workers, replicas 1, server 1 killed at step 950 (most of the data's
#   ids seen): the heir's re-replication line (bytes, seconds) and the rows
#   each server's tables hold at the end;
# - the same with at most 100,000 rows of the deep table in memory per
#   server (server_cache_rows), the rest on disk, copies too.
# Usage: sh tests/bench/replication_bench.sh PSTRAIN_BIN
# Prints one line per figure; logs stay in a temporary folder it names.
set -u
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
echo "replication_bench: logs in $WORK"
. "$REPO/tests/cluster_util.sh"
have_fmnist || exit 77

# lenet NAME REPLICAS STEPS LOG_EVERY: the shipped LeNet config, changed.
lenet() {
  python3 - "$REPO/configs/lenet_fashion_mnist.yaml" "$WORK/$1.yaml" "$2" "$3" "$4" << 'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
c['train']['steps'] = int(sys.argv[4])
c['train']['log_every'] = int(sys.argv[5])
c['train']['replication'] = {'replicas': int(sys.argv[3])}
yaml.safe_dump(c, open(sys.argv[2], 'w'))
PY
}

# wide_deep NAME REPLICAS STEPS LOG_EVERY: the shipped Wide&Deep config on
# the generated data, changed.
wide_deep() {
  python3 - "$REPO/configs/wide_deep_criteo.yaml" "$WORK/$1.yaml" "$2" "$3" "$4" "$WORK/data" \
    << 'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
c['data']['train'] = [sys.argv[6] + '/train.txt']
c['data']['test'] = [sys.argv[6] + '/test.txt']
c['train']['steps'] = int(sys.argv[4])
c['train']['log_every'] = int(sys.argv[5])
c['train']['replication'] = {'replicas': int(sys.argv[3])}
yaml.safe_dump(c, open(sys.argv[2], 'w'))
PY
}
"$BIN" gen criteo --rows 1000000 --shards 2 --test-rows 20000 --out "$WORK/data" > /dev/null ||
  { echo "gen criteo failed"; exit 1; }

# throughput MODEL STEPS: each shape and replica count, twice in turns.
throughput() {
  model=$1 steps=$2
  for round in 1 2; do
    for shape in "2 0" "2 1" "3 0" "3 1" "3 2"; do
      set -- $shape
      name="tp-$model-$1-$2-$round"
      "$model" "$name" "$2" "$steps" 100
      "$BIN" local --config "$WORK/$name.yaml" --servers "$1" --workers 2 > "$WORK/$name.log" 2>&1 ||
        { echo "$name failed"; tail -3 "$WORK/$name.log"; exit 1; }
      rate=$(grep -o "worker 0 finished [0-9]* steps in [0-9.]* s: [0-9]* samples/s" \
        "$WORK/$name.log" | awk '{ print $9 }')
      sent=$(grep -o "replication: sent [0-9]* changes, [0-9]* bytes" "$WORK/$name.log" |
        awk '{ s += $5 } END { print s + 0 }')
      echo "$model servers $1 replicas $2 round $round: $rate samples/s, replication bytes $sent" \
        "$(pushed_share "$model" "$steps" "$sent")"
    done
  done
}
# pushed_share MODEL STEPS SENT: LeNet's replication bytes against the
# gradient bytes pushed (61706 PS floats, 2 workers); nothing for tables,
# whose pushes carry a batch's ids.
pushed_share() {
  [ "$1" = lenet ] || return 0
  pushed=$(($2 * 2 * 61706 * 4))
  echo "= $(awk -v s="$3" -v p="$pushed" 'BEGIN { printf "%.3f", s / p }') of the pushed $pushed"
}

echo "== throughput (LeNet, 300 steps, pstrain local)"
throughput lenet 300
echo "== throughput (Wide&Deep, 1M rows, 300 steps, pstrain local)"
throughput wide_deep 300

export MS_SERVER_NUM=3 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1
export PSTRAIN_CONNECT_TIMEOUT=60 PSTRAIN_HEARTBEAT_TIMEOUT=10

# killed RUN AT_STEP: the job of PSTRAIN_CONFIG in processes; server 1
# killed once worker 0 logged step AT_STEP of its first epoch.
killed() {
  RUN=$1
  ID_PREFIX=$1
  start_scheduler
  for n in server_0 server_1 server_2 worker_0 worker_1; do start "$n"; done
  wait_for_count "epoch: 1 step: $2," "$(node_log worker_0)" 1 3000 || fail "$RUN: no step $2"
  T0=$(now_ms)
  kill -9 "$(node_pid server_1)"
  for n in scheduler worker_0 worker_1; do
    wait_exit "$n" 6000
    [ "$status" = 0 ] || fail "$RUN: $n exited $status"
  done
  lost=$(log_ms "$(node_log scheduler)" "lost server 1")
  # The last server's backups holding every partition again, and worker
  # 0's first step line written after the scheduler's "lost server".
  held=0
  for s in 0 2; do
    t=$(log_ms "$(node_log server_$s)" "are on its .* backups again")
    [ -n "$t" ] && [ "$t" -gt "$held" ] && held=$t
  done
  next=$(awk -v t0="$lost" '/epoch: [0-9]* step: / {
      split($2, hms, ":"); gsub(/\]/, "", hms[3]);
      cmd = "date -d \"" substr($1, 2) " " hms[1] ":" hms[2] ":" hms[3] "\" +%s%3N";
      cmd | getline ms; close(cmd);
      if (ms > t0) { print ms; exit } }' "$(node_log worker_0)")
  echo "$RUN: from the kill: scheduler's 'lost server 1' $((lost - T0)) ms;" \
    "backups hold every partition again $((held - T0)) ms; worker 0's next step $((next - T0)) ms"
  grep -h "are on its .* backups again" "$WORK"/"$RUN"-server_*.log | sed 's/.*replication: /  /'
}

echo "== a kill (LeNet, 3 servers x 2 workers, replicas 1)"
lenet kill 1 600 1
export PSTRAIN_CONFIG="$WORK/kill.yaml"
killed kill 150

echo "== a large shard (MLP, about 53 MiB per server, replicas 1)"
cat > "$WORK/big.yaml" << YAML
model:
  input: [1, 28, 28]
  loss: softmax_cross_entropy
  layers:
    - flatten
    - {name: fc1, type: linear, out: 8192}
    - relu
    - {name: fc2, type: linear, out: 4096}
    - relu
    - {name: fc3, type: linear, out: 10}
data:
  format: idx
  train: [$FMNIST/train-images-idx3-ubyte.gz, $FMNIST/train-labels-idx1-ubyte.gz]
  test: [$FMNIST/t10k-images-idx3-ubyte.gz, $FMNIST/t10k-labels-idx1-ubyte.gz]
train:
  steps: 12
  batch_size: 32
  log_every: 1
  optimizer: {type: sgd, lr: 0.01}
  replication: {replicas: 1}
YAML
export PSTRAIN_CONFIG="$WORK/big.yaml"
killed big 5

echo "== a large table share (Wide&Deep, 1M rows, replicas 1)"
wide_deep wdkill 1 1200 50
export PSTRAIN_CONFIG="$WORK/wdkill.yaml"
killed wdkill 950
grep -h "rows (primary)" "$WORK"/wdkill-server_*.log | sed 's/.*replication: /  /'

echo "== a large table share with rows on disk (the same, 100,000 deep rows in memory per server)"
wide_deep wdtier 1 1200 50
mkdir -p "$WORK/wdtier-store"
python3 - "$WORK/wdtier.yaml" "$WORK/wdtier-store" << 'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
c['train']['store_dir'] = sys.argv[2]
for rule in c['parameters']:
    if rule.get('match') == 'deep_emb.weight':
        rule['server_cache_rows'] = 100000
yaml.safe_dump(c, open(sys.argv[1], 'w'))
PY
export PSTRAIN_CONFIG="$WORK/wdtier.yaml"
killed wdtier 950
grep -h "rows (primary)" "$WORK"/wdtier-server_*.log | sed 's/.*replication: /  /'
grep -h "'deep_emb.weight' at step 1000:" "$WORK"/wdtier-server_*.log | sed 's/.*\] /  /' | cut -c 1-160
