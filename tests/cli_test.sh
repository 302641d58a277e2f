#!/bin/sh
# The command line as a user meets it: bad variables exit 2 with a one-line
# message naming the variable; --help on every command; bare pstrain prints
# the usage; bench and gen JSON survives hostile paths; --version; the log
# level; a node with no scheduler gives up in time;
# `pstrain local` labels lines by role and rank, and refuses to run without
# a model (exit 0 means a model was trained); a worker that cannot hold its
# data says so in one line, exit 1, not std::bad_alloc's abort;
# --set and --resume change a config for one run;
# the cache-sizing bench reads a config's data; the tiered-table bench.
# Usage: sh tests/cli_test.sh PSTRAIN_BIN [REPO_DIR]
set -u
BIN="$1"
REPO="${2:-$(dirname "$0")/..}"
. "$(dirname "$0")/check_util.sh"
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

# --help on every command and subcommand: exit 0, its flags named (and the
# variable of each where it has one).
for case in "|--sched-port|MS_SCHED_PORT|PSTRAIN_LOG_LEVEL|pstrain export" \
            "local|--servers|MS_SERVER_NUM|--log-level|PSTRAIN_HTTP_PORT" \
            "bench|kv|allreduce|embedding|train" \
            "bench kv|--bytes|--servers|--compare|--rounds" \
            "bench allreduce|--bytes|--world|--transport|--help" \
            "bench embedding|--dim|--cases|--config|--workers" \
            "bench embedding|--store-dir|--tier-ids|--tier-rounds|tiered" \
            "bench train|--config|--steps|--servers|--workers" \
            "gen|criteo|--help|criteo|criteo" \
            "gen criteo|--rows|--out|--shards|--test-rows" \
            "export|--checkpoint|--out|--help|--help" \
            "eval|--config|--checkpoint|--help|--help" \
            "check|--config|--help|--help|--help" \
            "plot|METRICS|--out|--help|--help"; do
  IFS='|' read -r command f1 f2 f3 f4 <<EOC
$case
EOC
  for help in --help -h; do
    # shellcheck disable=SC2086
    run_env "" $command $help; status=$?
    check "pstrain $command $help exits 0 (got $status)" [ "$status" = 0 ]
    for flag in "$f1" "$f2" "$f3" "$f4"; do
      check "pstrain $command $help names $flag" grep -q -e "$flag" "$OUT"
    done
  done
done

# Bare pstrain: how to start, exit 2, nothing started. With MS_ROLE set it
# runs that role (here: the missing shape is named).
run_env ""; status=$?
check "bare pstrain exits 2 (got $status)" [ "$status" = 2 ]
check "bare pstrain prints the usage" has "^Usage:"
check "the usage lists the subcommands" has "pstrain plot METRICS"
run_env "MS_ROLE=MS_WORKER"; status=$?
check "pstrain with MS_ROLE runs the role (got $status)" [ "$status" = 2 ]
check "it names what the role lacks" has "MS_SERVER_NUM (or --servers) is not set"

# Unknown commands and flags: one line naming them, exit 2.
for case in "frobnicate|unknown command 'frobnicate'" \
            "bench frob|A subcommand is required" \
            "bench|A subcommand is required" \
            "bench kv --bogus 1|--bogus" \
            "bench kv --bytes 0|--bytes" \
            "bench train|--config is required" \
            "gen mnist|A subcommand is required" \
            "gen criteo --rows 10 --out x --bogus|--bogus" \
            "gen criteo --out x|--rows is required" \
            "local --bogus 1|unknown flag --bogus" \
            "local --workers|--workers" \
            "export --out x|--checkpoint is required" \
            "eval --config x|--checkpoint is required" \
            "check|--config is required" \
            "plot --out x.svg|METRICS" \
            "plot a.jsonl|--out is required"; do
  command=${case%%|*}
  message=${case#*|}
  # shellcheck disable=SC2086
  run_env "" $command; status=$?
  check "pstrain $command exits 2 (got $status)" [ "$status" = 2 ]
  check "pstrain $command is one line" [ "$(lines)" = 1 ]
  check "pstrain $command names '$message'" has "$message"
done

# --version: the version of the top CMakeLists.txt and the build options.
run_env "" --version; status=$?
version=$(sed -n 's/^project(pstrain VERSION \([0-9.]*\).*/\1/p' "$REPO/CMakeLists.txt")
check "--version exits 0" [ "$status" = 0 ]
check "--version shows $version and the build options" \
  grep -Eq "^pstrain $version \(CUDA: (yes|no), NCCL: (yes|no), native: (yes|no), [A-Za-z]+\)$" "$OUT"

# The log level: warn hides the info lines; a bad level is refused.
env -i PSTRAIN_LOG_LEVEL=warn "$BIN" local --config "$TINY" --servers 1 --workers 1 > "$OUT" 2>&1; status=$?
check "PSTRAIN_LOG_LEVEL=warn: the job runs (got $status)" [ "$status" = 0 ]
check "PSTRAIN_LOG_LEVEL=warn hides info lines" [ "$(grep -c '\[info\]' "$OUT")" = 0 ]
check "PSTRAIN_LOG_LEVEL=warn keeps warnings" has "\[warning\]"
env -i PSTRAIN_LOG_LEVEL=warn "$BIN" local --config "$TINY" --servers 1 --workers 1 --log-level info \
  > "$OUT" 2>&1
check "--log-level info overrides PSTRAIN_LOG_LEVEL" has "\[info\] the job finished"
for case in "PSTRAIN_LOG_LEVEL=loud|local|PSTRAIN_LOG_LEVEL is 'loud': expected trace, debug, info, warn, error or off" \
            "|local --log-level loud|--log-level is 'loud': expected trace" \
            "PSTRAIN_LOG_LEVEL=WARN|bench kv --bytes 4|PSTRAIN_LOG_LEVEL is 'WARN'"; do
  vars=${case%%|*}; rest=${case#*|}
  command=${rest%%|*}; message=${rest#*|}
  # shellcheck disable=SC2086
  run_env "$vars" $command; status=$?
  check "$vars $command exits 2 (got $status)" [ "$status" = 2 ]
  check "$vars $command is one line" [ "$(lines)" = 1 ]
  check "$vars $command names the level" has "$message"
done

for case in "MS_ROLE=MS_BOSS|MS_ROLE is 'MS_BOSS': expected MS_SCHED, MS_PSERVER" \
            "MS_WORKER_NUM=0|MS_WORKER_NUM is '0': expected an integer from 1 to 65536" \
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
run_env "$GOOD PSTRAIN_CONNECT_TIMEOUT=1 PSTRAIN_CONFIG=$TINY"; status=$?
took=$(( $(date +%s) - start ))
check "a worker with no scheduler exits 1 (got $status)" [ "$status" = 1 ]
check "its message names the address" has "cannot reach the scheduler at 127.0.0.1:1"
check "it gives up within the configured time (took $took s)" [ "$took" -le 10 ]

# No model, no success: a worker or `pstrain local` without a config has
# nothing to train; it says so in one line, exit 2, before it starts.
for command in local ""; do
  run_env "$GOOD" $command; status=$?
  check "pstrain ${command:-worker} with no config exits 2 (got $status)" [ "$status" = 2 ]
  check "pstrain ${command:-worker} with no config is one line" [ "$(lines)" = 1 ]
  check "pstrain ${command:-worker} with no config says what to pass" \
    has "^pstrain: no model is configured: pass --config or PSTRAIN_CONFIG$"
done

# `pstrain local` labels each node's lines with the role and rank it joined as.
"$BIN" local --config "$TINY" --servers 1 --workers 2 > "$OUT" 2>&1; status=$?
check "pstrain local exits 0 (got $status)" [ "$status" = 0 ]
for node in "server 0" "worker 0" "worker 1"; do
  check "[$node] logs that $node joined" has "\] \[$node\] \[info\] ${node% *} rank ${node#* } joined a job"
  check "[$node] logs that $node stops" has "\] \[$node\] \[info\] ${node% *} rank ${node#* } stops"
done

# --set changes the config for this run and --resume picks its checkpoint
# up: 6 steps with a checkpoint every 3, then 3 more from step 6. A --set
# naming no key of the config is refused like the same key in the file.
CK="checkpoint={dir: $DATA/ck, every_steps: 3}"
"$BIN" local --config "$TINY" --servers 1 --workers 1 --set train.steps=6 --set "train.$CK" \
  > "$OUT" 2>&1; status=$?
check "local --set exits 0 (got $status)" [ "$status" = 0 ]
check "--set train.steps=6 trains 6 steps" has "worker 0 finished 6 steps"
"$BIN" local --config "$TINY" --servers 1 --workers 1 --set train.steps=9 --set "train.$CK" \
  --resume > "$OUT" 2>&1; status=$?
check "local --resume exits 0 (got $status)" [ "$status" = 0 ]
check "--resume resumes at step 6" has "resuming at step 6 from"
"$BIN" local --config "$TINY" --set train.step=9 > "$OUT" 2>&1; status=$?
check "a --set of an unknown key exits 2 (got $status)" [ "$status" = 2 ]
check "it names the --set" has "^pstrain: .*tiny.yaml: train.step (from --set): unknown key (allowed: epochs"
"$BIN" local --config "$TINY" --resume > "$OUT" 2>&1; status=$?
check "--resume without a checkpoint exits 2 (got $status)" [ "$status" = 2 ]
check "it says what is missing" has "^pstrain: --resume: .*tiny.yaml has no train.checkpoint"

# A batch_norm layer in a job whose weights are all on the servers: its
# running statistics stay with the workers (linked in a ring for them), the
# chief's are checkpointed, and pstrain eval of the checkpoint gives the
# chief's own last test line.
# bn_job NAME LAYER EVERY: trains with LAYER before the linear one,
# checkpointing every EVERY steps into DATA/NAME, then evaluates the last
# checkpoint: it must give the chief's own last test line.
bn_job() {
  BN="model.deep=[$2, {name: dense, type: linear, out: 1}]"
  "$BIN" local --config "$TINY" --servers 1 --workers 2 --set "$BN" \
    --set "train.checkpoint={dir: $DATA/$1, every_steps: $3}" > "$OUT" 2>&1; status=$?
  check "$1: the job exits 0 (got $status)" [ "$status" = 0 ]
  check "$1: its workers link a ring for the statistics" has "ring: the 2 workers"
  trained=$(grep 'test AUC' "$OUT" | tail -n 1 | sed 's/.*\(test AUC.*\)/\1/')
  last=$(sed -n 's/.*checkpoint of step \([0-9]*\) written.*/\1/p' "$OUT" | tail -n 1)
  "$BIN" eval --config "$TINY" --set "$BN" --checkpoint "$DATA/$1" > "$OUT" 2>&1; status=$?
  check "$1: eval of its checkpoint exits 0 (got $status)" [ "$status" = 0 ]
  check "$1: eval gives the chief's last test line ($trained)" has "checkpoint step $last: $trained"
}
bn_job ckbn "{type: batch_norm}" 4
# sync_stats: the statistics averaged every step too (checkpoints every 3
# steps, between epoch ends: every worker's collectives stay in step).
bn_job ckbn-sync "{type: batch_norm, sync_stats: true}" 3

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

# The tiered table next to an all-in-memory one, tiny: a line per Zipf
# exponent, resident share and policy, with what a reader compares; rows
# move only below 100%; the store's directory is gone at the end.
STORE="$DATA/store-parent"
mkdir "$STORE"
"$BIN" bench embedding --cases tiered --dim 4 --tier-ids 2000 --tier-rounds 8 --store-dir "$STORE" \
  > "$OUT" 2>&1; status=$?
check "the tiered case runs (got $status)" [ "$status" = 0 ]
check "it prints 10 lines" [ "$(grep -c '"case":"tiered"' "$OUT")" = 10 ]
check "each line has its figures, the same draws in memory, and rows move below 100%" \
  python3 -c 'import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
seen = set()
for l in lines:
  assert l["zipf"] in (1.05, 1.2) and l["resident"] in (1.0, 0.3, 0.1), l
  assert l["policy"] in ("lru", "tinylfu") and l["dim"] == 4, l
  assert l["ops_per_s"] > 0 and l["memory_ops_per_s"] > 0, l
  assert abs(l["vs_memory"] - l["ops_per_s"] / l["memory_ops_per_s"]) < 2e-3, l
  assert l["budget_rows"] == max(1, int(l["resident"] * l["rows"])), l
  assert (l["read_back_per_batch"] > 0) == (l["resident"] < 1), l
  seen.add((l["zipf"], l["resident"], l["policy"]))
assert len(seen) == 10, seen' "$OUT"
check "the tiered case removes its store" [ -z "$(ls -A "$STORE")" ]
# The store alone: a line per dim with its per-row costs, every row written
# read back (the case fails otherwise), and the store's directory gone.
"$BIN" bench embedding --cases store --dim 4,8 --tier-ids 2000 --store-dir "$STORE" \
  > "$OUT" 2>&1; status=$?
check "the store case runs (got $status)" [ "$status" = 0 ]
check "it prints a line per dim with its figures" python3 -c 'import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l["dim"] for l in lines] == [4, 8], lines
for l in lines:
  assert l["case"] == "store" and l["rows"] == 2000, l
  assert l["record_bytes"] == 4 * 2 * l["dim"] + 16, l
  for k in ("write_us_per_row", "write_cpu_us_per_row", "read_disk_us_per_row",
            "read_memtable_us_per_row"):
    assert l[k] > 0, (k, l)' "$OUT"
check "the store case removes its store" [ -z "$(ls -A "$STORE")" ]
# A live row move, one server's side: a line per dim, a third of the rows moved.
"$BIN" bench embedding --cases move --dim 4,8 --tier-ids 3000 > "$OUT" 2>&1; status=$?
check "the move case runs (got $status)" [ "$status" = 0 ]
check "it prints a line per dim with its figures" python3 -c 'import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l["dim"] for l in lines] == [4, 8], lines
for l in lines:
  assert l["case"] == "move" and l["rows"] == 3000 and 800 < l["moved_rows"] < 1200, l
  assert l["bytes"] > l["moved_rows"] * 4 * 2 * l["dim"], l' "$OUT"
"$BIN" bench embedding --cases tiered --store-dir "$DATA/missing/dir" > "$OUT" 2>&1; status=$?
check "a missing --store-dir exits 1 (got $status)" [ "$status" = 1 ]
check "it names the directory" has "store-dir $DATA/missing/dir: cannot create"

# Sizes a config implies are capped before anything is allocated:
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

# A worker whose training images do not fit its memory: 342000 blank 28x28
# images (1 MiB gzip-compressed, 1 GiB as floats) under an address-space
# limit that the same job on tiny data runs under, plus 256 MB. Loading them
# takes at least 1.5 GiB more than the job had (the last growth of the
# samples' array), so it fails whatever the process needs beside them: one
# line naming the file, exit 1. It aborted with std::bad_alloc (134).
n=342000
be32() { printf "\\$(printf %03o $(($1 >> 24 & 255)))\\$(printf %03o $(($1 >> 16 & 255)))\\$(printf %03o $(($1 >> 8 & 255)))\\$(printf %03o $(($1 & 255)))"; }
{ printf '\0\0\10\3'; be32 $n; be32 28; be32 28; head -c $((n * 784)) /dev/zero; } | gzip -1 > "$DATA/big-images.gz"
{ printf '\0\0\10\1'; be32 $n; head -c $n /dev/zero; } | gzip -1 > "$DATA/big-labels.gz"
printf '%s\n' 'model:' '  input: [1, 28, 28]' '  layers: [flatten, {name: fc, type: linear, out: 10}]' \
  'data: {format: idx, train: [big-images.gz, big-labels.gz]}' 'train: {steps: 2}' > "$DATA/big.yaml"
# Under limits too tight for the tiny job, memory or threads run out on
# threads other than main: one line and exit 1, never an abort (134). (Much
# tighter limits fail in the dynamic loader, before pstrain runs: 127.)
limit=""
for kb in 1000000 1500000 2000000 2500000 3000000 4000000; do
  (ulimit -v $kb; "$BIN" local --config "$TINY" --servers 1 --workers 1) > "$OUT" 2>&1
  status=$?
  if [ "$status" = 0 ]; then
    limit=$((kb + 256000))
    break
  fi
  [ "$status" = 127 ] && continue
  check "the tiny job under ulimit -v $kb exits 1, not an abort (got $status)" [ "$status" = 1 ]
  check "the tiny job under ulimit -v $kb says why" \
    grep -q "^pstrain: .*\(out of memory\|could not start\)" "$OUT"
  echo "the tiny job under ulimit -v $kb: $(grep '^pstrain: ' "$OUT" | head -n 1)"
done 2> /dev/null
check "the tiny job runs under some address-space limit" [ -n "$limit" ]
(ulimit -v "${limit:-4256000}"; "$BIN" local --config "$DATA/big.yaml" --servers 1 --workers 1) \
  > "$OUT" 2>&1
status=$?
check "a worker out of memory for its data exits 1 under ulimit -v $limit (got $status)" [ "$status" = 1 ]
check "its last line names the file and what did not fit" \
  grep -q "\[local\] \[error\] .*$DATA/big-images.gz: not enough memory for its 342000 images of 28x28" "$OUT"
check "it did not abort" [ "$(grep -c 'terminate called\|std::bad_alloc$' "$OUT")" = 0 ]
echo "out of memory under ulimit -v $limit: $(grep '\[local\] \[error\]' "$OUT")"

# Training throughput of a config with all-reduced (ps: false) weights: the
# job's workers need their ring (small tables keep the local case quick).
sed -e 's/1048576/4096/g' "$DATA/wd.yaml" > "$DATA/wd_small.yaml"
"$BIN" bench train --config "$DATA/wd_small.yaml" --steps 5 --servers 1 --workers 1 > "$OUT" 2>&1
status=$?
check "bench train runs Wide&Deep (got $status)" [ "$status" = 0 ]
check "it prints the local and the ps case" [ "$(grep -c '"bench":"train"' "$OUT")" = 2 ]
check "the ps case has its communication share" has '"mode":"ps".*"comm_share":'

# Hostile paths (quotes, backslash, newline) in the JSON lines: python3's
# json.loads reads them back as the same path.
if command -v python3 > /dev/null 2>&1; then
  HOSTILE="$DATA/q\"d\\ir
x"
  mkdir -p "$HOSTILE"
  sed -e "s|train: \[train.txt\]|train: [\"$DATA/train.txt\"]|" "$DATA/wd_small.yaml" > "$HOSTILE/l.yaml"
  json_has() {  # json_has KEY VALUE: every line of $OUT is JSON with KEY == VALUE
    python3 -c 'import json, sys
lines = open(sys.argv[1]).read().splitlines()
sys.exit(not lines or any(json.loads(l)[sys.argv[2]] != sys.argv[3] for l in lines))' "$OUT" "$1" "$2"
  }
  "$BIN" bench train --config "$HOSTILE/l.yaml" --steps 5 --servers 1 --workers 1 > "$OUT" 2>/dev/null
  status=$?
  check "bench train with a hostile config path runs (got $status)" [ "$status" = 0 ]
  check "bench train prints two lines" [ "$(grep -c '"bench":"train"' "$OUT")" = 2 ]
  check "bench train's JSON carries the hostile path" json_has config "$HOSTILE/l.yaml"
  "$BIN" bench embedding --cases data --config "$HOSTILE/l.yaml" --workers 1 > "$OUT" 2>/dev/null
  check "bench embedding's data case carries the hostile path" json_has config "$HOSTILE/l.yaml"
  "$BIN" gen criteo --rows 100 --test-rows 0 --out "$HOSTILE/gen" > "$OUT" 2>/dev/null
  check "gen criteo's JSON carries the hostile path" json_has out "$HOSTILE/gen"
fi

echo "cli_test: $passed passed, $failed failed"
[ "$failed" = 0 ]
