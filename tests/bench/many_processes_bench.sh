#!/bin/bash
# A job of many separate processes on this machine, with default settings:
# one scheduler, SERVERS servers and WORKERS workers (default 10 and 90) of a
# tiny MLP on a 2,048-image slice of Fashion-MNIST, 1 epoch. Prints one JSON
# object: how long until the scheduler logged that every rank registered,
# the whole job's wall time, the scheduler's CPU seconds and peak RSS, and
# how many processes exited non-zero.
#   {"bench":"many_processes","servers":10,"workers":90,"register_s":2.6,...}
# Usage: bash tests/bench/many_processes_bench.sh PSTRAIN_BIN [SERVERS] [WORKERS]
set -u
BIN="$1"
SERVERS="${2:-10}"
WORKERS="${3:-90}"
DATA=/usr/share/datasets/fashion-mnist
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || { echo "skipped: no $DATA" >&2; exit 77; }
WORK=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
cat > "$WORK/tiny.yaml" << YAML
model:
  input: [1, 28, 28]
  loss: softmax_cross_entropy
  layers: [flatten, {name: fc1, type: linear, out: 8}, relu, {name: fc2, type: linear, out: 10}]
data:
  format: idx
  train: [$DATA/train-images-idx3-ubyte.gz, $DATA/train-labels-idx1-ubyte.gz]
  test: [$DATA/t10k-images-idx3-ubyte.gz, $DATA/t10k-labels-idx1-ubyte.gz]
  limit: 2048
train: {epochs: 1, batch_size: 8, optimizer: {type: sgd, lr: 0.05}}
YAML
# A port below Linux's ephemeral range, so no outgoing connection holds it.
port=$((20000 + RANDOM % 10000))
export MS_SERVER_NUM="$SERVERS" MS_WORKER_NUM="$WORKERS" MS_SCHED_HOST=127.0.0.1
export MS_SCHED_PORT="$port" PSTRAIN_CONFIG="$WORK/tiny.yaml"
cd "$WORK" || exit 1
start=$(date +%s.%N)
MS_ROLE=MS_SCHED /usr/bin/time -f '%U %S %M' -o sched.time "$BIN" > sched.log 2>&1 &
sched=$!
for i in $(seq 1 "$SERVERS"); do MS_ROLE=MS_PSERVER "$BIN" > "server_$i.log" 2>&1 & pids+=($!); done
for i in $(seq 1 "$WORKERS"); do MS_ROLE=MS_WORKER "$BIN" > "worker_$i.log" 2>&1 & pids+=($!); done
failed=0
deadline=$((SECONDS + 600))
for p in "${pids[@]}"; do
  while kill -0 "$p" 2> /dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  wait "$p" 2> /dev/null || failed=$((failed + 1))
done
wait "$sched"
sched_exit=$?
end=$(date +%s.%N)
pids=()
stamp() { date -d "$(echo "$1" | sed 's/^\[\([^]]*\)\].*/\1/')" +%s.%N; }
first=$(stamp "$(head -1 sched.log)")
ready_line=$(grep -m1 'Start the scheduler node is successful' sched.log)
ready=$([ -n "$ready_line" ] && stamp "$ready_line" || echo "$first")
read -r user sys rss_kb <<< "$(tail -1 sched.time)"
python3 - "$SERVERS" "$WORKERS" "$first" "$ready" "$start" "$end" "$user" "$sys" "$rss_kb" \
  "$sched_exit" "$failed" << 'PY'
import json, sys
s, w, first, ready, start, end, user, sys_s, rss, sched_exit, failed = sys.argv[1:]
print(json.dumps({"bench": "many_processes", "servers": int(s), "workers": int(w),
                  "register_s": round(float(ready) - float(first), 2),
                  "job_s": round(float(end) - float(start), 2),
                  "scheduler_cpu_s": round(float(user) + float(sys_s), 2),
                  "scheduler_rss_mb": round(int(rss) / 1024, 1),
                  "scheduler_exit": int(sched_exit), "nodes_failed": int(failed)}))
PY
[ "$sched_exit" = 0 ] && [ "$failed" = 0 ]
