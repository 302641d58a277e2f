# Replicated servers (train.replication, roles/server/replication.h): a
# sync LeNet job of 3 servers and 2 workers with replicas: 1 and no
# checkpoints, whose servers are killed with SIGKILL one after another
# while it trains, ends with exit 0 and the same weights, bit for bit, as
# the same job never killed: each lost server's partitions are taken over
# by its backup (roles/scheduler/promotion.cc), no step is redone and
# nothing rolls back.
#
# Usage: replication_test.sh PSTRAIN_BINARY [KILLS]
# The weights are compared by the servers' fingerprints at the end
# ("replication: server N's own ... digest"), whose sum over the live
# servers fingerprints the whole model wherever its partitions are.
set -u
BIN="$1"
KILLS="${2:-2}"
WORK=$(mktemp -d)
. "$(dirname "$0")/cluster_util.sh"
cleanup() {
  cluster_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
[ -n "${REPLICATION_KEEP:-}" ] && trap - EXIT
have_fmnist || exit 77
command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }

# config NAME REPLICAS: a sync LeNet job on a slice of Fashion-MNIST.
config() {
  cat > "$WORK/$1.yaml" << YAML
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
    - {name: fc2, type: linear, out: 84}
    - relu
    - {name: fc3, type: linear, out: 10}
data:
  format: idx
  train: [$FMNIST/train-images-idx3-ubyte.gz, $FMNIST/train-labels-idx1-ubyte.gz]
  test: [$FMNIST/t10k-images-idx3-ubyte.gz, $FMNIST/t10k-labels-idx1-ubyte.gz]
  limit: 4096
train:
  epochs: ${EPOCHS:-6}
  batch_size: 32
  mode: sync
  optimizer: {type: momentum, lr: 0.05, momentum: 0.9}
  partition_bytes: 16384
  log_every: 20
  replication: {replicas: $2}
YAML
}

export MS_SERVER_NUM=3 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1
export PSTRAIN_CONNECT_TIMEOUT=60 PSTRAIN_HEARTBEAT_TIMEOUT=10
NODES="server_0 server_1 server_2 worker_0 worker_1"

# run NAME KILLS: the job, with KILLS servers killed while it trains.
run() {
  RUN=$1
  config "$RUN" 1
  export PSTRAIN_CONFIG="$WORK/$RUN.yaml" ID_PREFIX="$RUN"
  start_scheduler
  for n in $NODES; do start "$n"; done
  live="0 1 2"
  k=0
  while [ "$k" -lt "$2" ]; do
    # A step well into the job, then a server that is still live.
    wait_for_count "epoch: [0-9]* step: " "$(node_log worker_0)" $((k * 4 + 2)) 1200 ||
      fail "$RUN: worker 0 did not get to its progress line $((k * 4 + 2))"
    victim=$(echo $live | awk -v s="$$$k" '{ srand(s); print $(int(rand() * NF) + 1) }')
    kill -9 "$(node_pid server_$victim)"
    echo "  $RUN: killed server $victim (SIGKILL)"
    live=$(echo $live | tr ' ' '\n' | grep -vx "$victim" | tr '\n' ' ')
    k=$((k + 1))
    wait_for_count "lost server $victim: server [0-9]* holds its partitions now" \
      "$(node_log scheduler)" 1 300 || fail "$RUN: server $victim was not replaced by its backup"
  done
  for n in scheduler worker_0 worker_1; do
    wait_exit "$n" 3000
    [ "$status" = 0 ] || fail "$RUN: $n exited $status"
  done
  for s in $live; do
    wait_exit "server_$s" 300
    [ "$status" = 0 ] || fail "$RUN: server_$s exited $status"
  done
  # The sum of the live servers' own partitions' fingerprints.
  for s in $live; do
    grep -o "server $s's own [0-9]* partitions, digest [0-9a-f]*" "$(node_log "server_$s")"
  done | awk '{ n += $4; print $7 }
    END { print "partitions " n > "/dev/stderr" }' > "$WORK/$RUN.digests" 2> "$WORK/$RUN.count"
  python3 -c "
import sys
print('%016x %s' % (sum(int(l, 16) for l in open(sys.argv[1]).read().split()) % 2**64,
                    open(sys.argv[2]).read().split()[1]))" "$WORK/$RUN.digests" "$WORK/$RUN.count" \
    > "$WORK/$RUN.model"
  echo "  $RUN: model fingerprint $(cat "$WORK/$RUN.model") partitions"
  if grep -q "pausing the job\|roll" "$(node_log scheduler)"; then fail "$RUN: the job rolled back"; fi
}

run calm 0
run killed "$KILLS"
grep -h "lost server" "$(node_log scheduler)" | cut -c 1-200
[ "$(cat "$WORK/calm.model")" = "$(cat "$WORK/killed.model")" ] ||
  fail "the killed job's weights differ from the calm one's"
echo "replication_test: passed ($KILLS servers killed, the same weights bit for bit)"
