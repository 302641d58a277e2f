#!/bin/bash
# Training on a slow network: LeNet on Fashion-MNIST, the scheduler, 2
# servers and 4 workers each on a host of its own (network namespaces,
# tests/tools/netns_cluster.sh), every host's link limited to each rate in
# turn (tc tbf, both directions). For each way of sharing updates, one JSON
# line: seconds from the job's start until worker 0's test accuracy first
# reached TARGET (null: not within EPOCHS), the accuracy at the end, and
# the bytes per global step that crossed the links (every host's transmitted
# bytes, as its interface counts them: headers and all traffic included, the
# all-reduce ring's too).
#   {"bench":"bandwidth_train","link_mbit":100,"case":"dense_ps","time_to_target_s":412.3,...}
# Cases (configs/): dense_ps (lenet_fashion_mnist), allreduce (every weight
# all-reduced among the workers over TCP, no servers used),
# compressed_ps (lenet_compressed: threshold-compressed pushes),
# compressed_ps_pulls (the same with compressed pulls, pull_density
# PULL_DENSITY),
# compressed_allreduce (as allreduce, threshold-compressed), average_4 and
# average_16 (mode: average, every 4 or 16 steps).
# Needs root and Debian's dataset-fashion-mnist; exits 77 otherwise.
# Usage: bash tests/bench/bandwidth_bench.sh PSTRAIN_BIN [MBIT...]   (default 1000 100)
# Environment: EPOCHS (default 12), TARGET (0.90), CASES (space-separated,
# default all), CASE_TIMEOUT_S (default 1800), PULL_DENSITY (0.1).
set -u
BIN=$(readlink -f "$1")
shift
RATES=("$@")
[ ${#RATES[@]} -gt 0 ] || RATES=(1000 100)
EPOCHS=${EPOCHS:-12}
TARGET=${TARGET:-0.90}
CASES=${CASES:-dense_ps allreduce compressed_ps compressed_ps_pulls compressed_allreduce average_4 average_16}
PULL_DENSITY=${PULL_DENSITY:-0.1}
CASE_TIMEOUT_S=${CASE_TIMEOUT_S:-1800}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DATA=/usr/share/datasets/fashion-mnist
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || { echo "skipped: no $DATA" >&2; exit 77; }
. "$REPO/tests/tools/netns_cluster.sh"
WORK=$(mktemp -d)
trap 'netns_teardown; rm -rf "$WORK"' EXIT
trap 'exit 1' HUP INT TERM
HOSTS="sched s0 s1 w0 w1 w2 w3"
netns_setup $HOSTS

# config CASE: the case's config on stdout, EPOCHS epochs.
config() {
  case "$1" in
  dense_ps) src=lenet_fashion_mnist ;;
  allreduce) src=lenet_fashion_mnist ;;
  compressed_ps | compressed_ps_pulls) src=lenet_compressed ;;
  compressed_allreduce) src=lenet_compressed ;;
  average_*) src=lenet_fashion_mnist ;;
  *) echo "unknown case $1" >&2; return 1 ;;
  esac
  sed "s/^  epochs: .*/  epochs: $EPOCHS/" "$REPO/configs/$src.yaml" |
    case "$1" in
    allreduce | compressed_allreduce) sed 's/ps: true/ps: false/' ;;
    average_*) sed "s/^  mode: sync .*/  mode: average\n  average_every: ${1#average_}/" ;;
    compressed_ps_pulls) sed "s/warmup_epochs: 0}/warmup_epochs: 0, pull_density: $PULL_DENSITY}/" ;;
    *) cat ;;
    esac
}

# tx_bytes: what every host's interface has sent so far.
tx_bytes() {
  total=0
  for h in $HOSTS; do
    total=$((total + $(netns_exec "$h" cat /sys/class/net/eth0/statistics/tx_bytes)))
  done
  echo $total
}

# run_case RATE CASE: one job; prints its JSON line.
run_case() {
  rate=$1 name=$2 dir="$WORK/$1-$2"
  mkdir -p "$dir"
  config "$name" > "$dir/job.yaml" || return 1
  if [ "$name" = compressed_ps_pulls ] && ! grep -q pull_density "$dir/job.yaml"; then
    echo "bandwidth_bench: configs/lenet_compressed.yaml has no compression line to add pull_density to" >&2
    return 1
  fi
  export PSTRAIN_CONFIG="$dir/job.yaml" PSTRAIN_LOG_DIR="$dir" MS_SERVER_NUM=2 MS_WORKER_NUM=4
  export MS_SCHED_HOST=$(netns_addr sched) MS_SCHED_PORT=7070
  unset MS_NODE_HOST
  # The hosts share this machine's /dev/shm: without this the workers would
  # find each other's shared-memory channels and never use the links.
  export PSTRAIN_RING_TRANSPORT=tcp
  tx_before=$(tx_bytes)
  start=$(date +%s.%N)
  MS_ROLE=MS_SCHED netns_bg sched "$BIN" > "$dir/scheduler.log" 2>&1
  sched=$NETNS_PID
  for r in 0 1; do MS_ROLE=MS_PSERVER MS_NODE_RANK=$r netns_bg "s$r" "$BIN" > "$dir/server_$r.log" 2>&1; done
  for r in 0 1 2 3; do MS_ROLE=MS_WORKER MS_NODE_RANK=$r netns_bg "w$r" "$BIN" > "$dir/worker_$r.log" 2>&1; done
  deadline=$((SECONDS + CASE_TIMEOUT_S))
  while kill -0 "$sched" 2> /dev/null && [ $SECONDS -lt $deadline ]; do sleep 1; done
  kill -0 "$sched" 2> /dev/null && { echo "bandwidth_bench: $name at $rate Mbit/s ran past ${CASE_TIMEOUT_S} s" >&2; kill "$sched"; }
  wait "$sched"
  status=$?
  # Every node of this case has ended before the next starts.
  for h in $HOSTS; do
    for p in $(ip netns pids "$(netns_ns "$h")"); do
      case "$(cat /proc/$p/comm 2> /dev/null)" in pstrain*) kill -9 "$p" ;; esac
    done
  done
  sleep 1
  tx=$(($(tx_bytes) - tx_before))
  python3 - "$dir" "$rate" "$name" "$TARGET" "$status" "$start" "$tx" << 'PY'
import json, sys, os
d, rate, name, target = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
status, start, tx = int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
def lines(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except OSError:
        return []
w0 = lines(os.path.join(d, "metrics-worker-0.jsonl"))
epochs = [e for e in w0 if e.get("event") == "epoch" and e.get("test_metric") is not None]
reached = next((e for e in epochs if e["test_metric"] >= target), None)
steps = max((e["step"] for e in w0 if e.get("event") == "step"), default=0)
print(json.dumps({
    "bench": "bandwidth_train", "link_mbit": rate, "case": name, "workers": 4, "servers": 2,
    "target": target,
    "time_to_target_s": None if reached is None else round(reached["time"] - start, 1),
    "epoch_at_target": None if reached is None else reached["epoch"],
    "final_accuracy": epochs[-1]["test_metric"] if epochs else None,
    "epochs": len(epochs), "steps": steps,
    "seconds_per_epoch": round((epochs[-1]["time"] - start) / len(epochs), 1) if epochs else None,
    "bytes_per_step": round(tx / steps) if steps else None,
    "exit": status}))
PY
}

for rate in "${RATES[@]}"; do
  for h in $HOSTS; do netns_limit "$h" "$rate" || exit 1; done
  for name in $CASES; do run_case "$rate" "$name"; done
done
