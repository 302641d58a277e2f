#!/bin/sh
# The command line as a user meets it: bad variables exit 2 with a one-line
# message naming the variable; a node with no scheduler gives up in time;
# `pstrain local` labels lines by role and rank;
# the cache-sizing bench reads a config's data.
# Usage: sh tests/cli_test.sh PSTRAIN_BIN [REPO_DIR]
set -u
BIN="$1"
REPO="${2:-$(dirname "$0")/..}"
OUT=$(mktemp)
DATA=$(mktemp -d)
trap 'rm -rf "$OUT" "$DATA"' EXIT
passed=0
failed=0
check() {
  desc="$1"; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $desc"; cat "$OUT"; fi
}
has() { grep -q "$1" "$OUT"; }
lines() { wc -l < "$OUT" | tr -d ' '; }

GOOD="MS_ROLE=MS_WORKER MS_SERVER_NUM=1 MS_WORKER_NUM=1 MS_SCHED_HOST=127.0.0.1 MS_SCHED_PORT=1"

# run_env "VAR=value ..." [args]: runs the binary in exactly that environment.
run_env() {
  vars="$1"; shift
  # shellcheck disable=SC2086
  env -i $vars "$BIN" "$@" > "$OUT" 2>&1
}

run_env "" --help; status=$?
check "--help exits 0" [ "$status" = 0 ]
check "--help explains roles and variables" has "MS_SCHED_PORT"

for case in "MS_ROLE=MS_BOSS|MS_ROLE is 'MS_BOSS': expected MS_SCHED, MS_PSERVER" \
            "MS_WORKER_NUM=0|MS_WORKER_NUM is '0': expected an integer from 1 to 4096" \
            "MS_SERVER_NUM=x|MS_SERVER_NUM is 'x': expected an integer" \
            "MS_SCHED_PORT=99999|MS_SCHED_PORT is '99999': expected a port number from 1 to 65535" \
            "MS_NODE_RANK=x|MS_NODE_RANK is 'x': expected a whole number" \
            "MS_NODE_RANK=1|MS_NODE_RANK (or --rank) is '1': expected a worker rank from 0 to 0 (MS_WORKER_NUM is 1)"; do
  override=${case%%|*}
  message=${case#*|}
  run_env "$GOOD $override"; status=$?
  check "$override exits 2 (got $status)" [ "$status" = 2 ]
  check "$override names the variable" has "pstrain: $message"
  check "$override is one line" [ "$(lines)" = 1 ]
done

run_env "MS_ROLE=MS_WORKER MS_SERVER_NUM=1 MS_WORKER_NUM=1 MS_SCHED_HOST=127.0.0.1"; status=$?
check "missing MS_SCHED_PORT exits 2" [ "$status" = 2 ]
check "missing MS_SCHED_PORT is named" has "MS_SCHED_PORT (or --sched-port) is not set"

run_env "$GOOD" --bogus 1; status=$?
check "unknown flag exits 2" [ "$status" = 2 ]
check "unknown flag is named" has "unknown flag --bogus"

# Nothing listens on port 1: the worker retries for 1 s, then gives up.
start=$(date +%s)
run_env "$GOOD PSTRAIN_CONNECT_TIMEOUT=1"; status=$?
took=$(( $(date +%s) - start ))
check "a worker with no scheduler exits 1 (got $status)" [ "$status" = 1 ]
check "its message names the address" has "cannot reach the scheduler at 127.0.0.1:1"
check "it gives up within the configured time (took $took s)" [ "$took" -le 10 ]

# `pstrain local` labels each node's lines with the role and rank it joined as.
"$BIN" local --servers 1 --workers 2 > "$OUT" 2>&1; status=$?
check "pstrain local with no config exits 0 (got $status)" [ "$status" = 0 ]
for node in "server 0" "worker 0" "worker 1"; do
  check "[$node] logs that $node joined" has "\] \[$node\] \[info\] ${node% *} rank ${node#* } joined a job"
  check "[$node] logs that $node stops" has "\] \[$node\] \[info\] ${node% *} rank ${node#* } stops"
done

# How much could a row cache save on this data? Bounds for 1%, 10% and 30%
# caches, larger caches never worse.
"$BIN" bench embedding --cases data > "$OUT" 2>&1; status=$?
check "the data case without --config exits 2 (got $status)" [ "$status" = 2 ]
check "it says what it needs" has "the data case needs --config FILE"
"$BIN" gen criteo --rows 4000 --shards 2 --test-rows 0 --out "$DATA" > "$OUT" 2>&1
check "gen criteo writes shards" [ -f "$DATA/train.txt-00001" ]
sed -e 's|train: \[.*\]|train: [train.txt]|' -e '/^  test:/d' "$REPO/configs/wide_deep_criteo.yaml" \
  > "$DATA/wd.yaml"
"$BIN" bench embedding --cases data --config "$DATA/wd.yaml" --workers 2 > "$OUT" 2>&1; status=$?
check "the data case runs (got $status)" [ "$status" = 0 ]
check "it prints a line per cache size" [ "$(grep -c '"case":"data"' "$OUT")" = 3 ]
rates=$(sed -n 's/.*"best_hit_rate":\([0-9.]*\).*/\1/p' "$OUT" | tr '\n' ' ')
check "bounds grow with the cache ($rates)" \
  awk -v r="$rates" 'BEGIN { n = split(r, a, " "); exit !(n == 3 && a[1] > 0 && a[1] <= a[2] && a[2] <= a[3] && a[3] <= 1) }'

# Sizes a config implies are capped before anything is allocated (issue 13):
# each is one line naming file, line and key, exit 2 (not std::bad_alloc,
# exit 134). Under a 4 GB address-space limit, so that a build that would
# try to allocate fails at once instead of eating the machine.
MLP="$REPO/configs/mlp_fashion_mnist.yaml"
WD="$REPO/configs/wide_deep_criteo.yaml"
for case in "out|$MLP|s/out: 256}/out: 2000000000}/|model.layers\[1\].out: makes parameter 'fc1.weight'" \
            "input|$MLP|s/input: \[1, 28, 28\]/input: [1, 100000, 100000]/|model.input: a batch of 64 samples" \
            "vocab|$WD|s/vocab: 1048576, dim: 16/vocab: 1000000000000000, dim: 16/|model.deep\[0\].vocab: expected an integer in 1..1099511627776" \
            "dim|$WD|s/vocab: 1048576, dim: 16/vocab: 1048576, dim: 100000/|model.deep\[0\].dim: expected an integer in 1..65536" \
            "max_rows|$WD|s/cache_rows: 100000,$/cache_rows: 100000, max_rows: 1000000000,/|parameters\[0\].max_rows: expected an integer in 0..268435456" \
            "oom|$MLP|s/out: 256}/out: 2000000}/|layer 1 (fc1) at line [0-9]*: not enough memory"; do
  name=${case%%|*}; rest=${case#*|}
  src=${rest%%|*}; rest=${rest#*|}
  edit=${rest%%|*}; message=${rest#*|}
  sed -e "$edit" "$src" > "$DATA/$name.yaml"
  (ulimit -v 4000000; "$BIN" local --config "$DATA/$name.yaml" --servers 1 --workers 1) > "$OUT" 2>&1
  status=$?
  check "config with a huge $name exits 2 (got $status)" [ "$status" = 2 ]
  check "config with a huge $name: one line" [ "$(lines)" = 1 ]
  check "config with a huge $name names file, line and key" has "^pstrain: $DATA/$name.yaml:.* .*$message"
done

# Training throughput of a config with all-reduced (ps: false) weights: the
# job's workers need their ring (small tables keep the local case quick).
sed -e 's/1048576/4096/g' "$DATA/wd.yaml" > "$DATA/wd_small.yaml"
"$BIN" bench train --config "$DATA/wd_small.yaml" --steps 5 --servers 1 --workers 1 > "$OUT" 2>&1
status=$?
check "bench train runs Wide&Deep (got $status)" [ "$status" = 0 ]
check "it prints the local and the ps case" [ "$(grep -c '"bench":"train"' "$OUT")" = 2 ]
check "the ps case has its communication share" has '"mode":"ps".*"comm_share":'

echo "cli_test: $passed passed, $failed failed"
[ "$failed" = 0 ]
