# Sourced by the multi-process tests (chaos_test.sh, failure_test.sh) and
# tests/bench/recovery_bench.sh: a job's processes started by hand on
# 127.0.0.1, one per node, as the launch scripts or a supervisor would, and
# ways to watch them. POSIX sh (dash and bash).
#
# The caller sets BIN (the pstrain binary) and WORK (a scratch folder), and
# may set RUN (a prefix of the log names: WORK/RUN-NAME.log) and ID_PREFIX
# (node ids are ID_PREFIX-NAME; default "chaos"). NAME is scheduler,
# server_<rank> or worker_<rank>, optionally followed by "-anything" to start
# a second process for the same rank. WORK/NAME.pid holds the process id.

FMNIST=/usr/share/datasets/fashion-mnist

# cluster_cleanup: kill -9 every process started here (stopped ones too).
cluster_cleanup() {
  for p in "$WORK"/*.pid; do [ -f "$p" ] && kill -9 "$(cat "$p")" 2> /dev/null; done
  return 0
}

# fail MESSAGE: says why, shows the end of every log, exits 1.
fail() {
  echo "FAILED: $*"
  for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 15 "$f"; }; done
  exit 1
}

node_log() { echo "$WORK/${RUN:+$RUN-}$1.log"; }
node_pid() { cat "$WORK/$1.pid"; }

# node_prefix NAME: the words start puts before the binary of NAME's
# process; none here. Tests whose nodes run on hosts of their own redefine
# it (tests/multi_host_test.sh: "ip netns exec HOST'S-NAMESPACE").
node_prefix() { :; }

# start NAME: one process of the job, appending to its log; its node id and
# rank come from the name, so a restart is the same node.
start() {
  case "$1" in
    scheduler) role=MS_SCHED ;;
    server_*) role=MS_PSERVER ;;
    worker_*) role=MS_WORKER ;;
  esac
  rank=${1#*_}
  (
    export MS_ROLE=$role MS_NODE_ID="${ID_PREFIX:-chaos}-$1"
    if [ "$1" != scheduler ]; then export MS_NODE_RANK="${rank%%-*}"; fi
    exec $(node_prefix "$1") "$BIN" >> "$(node_log "$1")" 2>&1
  ) &
  echo $! > "$WORK/$1.pid"
}
alive() { kill -0 "$(node_pid "$1")" 2> /dev/null; }

# count PATTERN FILE: lines of FILE matching PATTERN (0 when it is missing).
count() {
  n=$(grep -c "$1" "$2" 2> /dev/null)
  echo "${n:-0}"
}
# wait_for_count PATTERN FILE N [TENTHS]: at most TENTHS/10 s (default 60 s)
# for N lines matching; fails (returns 1) when they did not come.
wait_for_count() {
  t=0
  while [ "$(count "$1" "$2")" -lt "$3" ] && [ "$t" -lt "${4:-600}" ]; do sleep 0.1; t=$((t + 1)); done
  [ "$(count "$1" "$2")" -ge "$3" ]
}
# wait_exit NAME TENTHS: waits at most TENTHS/10 s for NAME (a child of
# this shell) to end; sets status to its exit status, or to "running".
wait_exit() {
  pid=$(node_pid "$1")
  t=0
  while kill -0 "$pid" 2> /dev/null && [ "$t" -lt "$2" ]; do sleep 0.1; t=$((t + 1)); done
  if kill -0 "$pid" 2> /dev/null; then status=running; return; fi
  wait "$pid"
  status=$?
}

# now_ms: the wall clock in milliseconds.
now_ms() { date +%s%3N; }
# log_ms FILE PATTERN: the time of FILE's first line matching PATTERN, in
# milliseconds of the wall clock (empty when there is none). Log lines begin
# with [YYYY-mm-dd HH:MM:SS.mmm].
log_ms() {
  stamp=$(grep -m 1 "$2" "$1" 2> /dev/null | sed -n 's/^\[\([0-9-]* [0-9:.]*\)\].*/\1/p')
  [ -n "$stamp" ] && date -d "$stamp" +%s%3N
}

# expect_exit_by DEADLINE_MS STATUS NAME...: every NAME (a child of this
# shell) has ended by the deadline, with STATUS ("nonzero": any but 0).
expect_exit_by() {
  deadline=$1 want=$2
  shift 2
  for n; do
    left=$(((deadline - $(now_ms)) / 100))
    [ "$left" -ge 0 ] || left=0
    wait_exit "$n" "$left"
    case "$want:$status" in
      *:running) fail "$n still runs $(((deadline - T0) / 1000)) s after $EVENT" ;;
      nonzero:0) fail "$n exited 0; expected a failure" ;;
      nonzero:*) ;;
      "$status:$status") ;;
      *) fail "$n exited $status; expected $want" ;;
    esac
  done
}
# expect_line NAME PATTERN: NAME's log has a line matching PATTERN.
expect_line() {
  grep -q "$2" "$(node_log "$1")" || fail "$1's log has no line matching '$2'"
  echo "  $1: $(grep -m 1 "$2" "$(node_log "$1")" | cut -c 1-300)"
}
# mark EVENT: the moment of EVENT, for the deadlines that follow.
mark() {
  T0=$(now_ms)
  EVENT="$1"
}

# pick_port SALT: a port for the scheduler, different per test process and
# salt, below Linux's ephemeral range (32768 and up), where another
# process's outgoing connection could hold it.
pick_port() { echo $((10000 + ($$ * 7 + ${1:-0} * 131) % 22000)); }

# start_scheduler: on a free port (another test may hold one: retry).
start_scheduler() {
  attempt=0
  while :; do
    export MS_SCHED_PORT=$(pick_port "$attempt")
    start scheduler
    t=0
    until grep -qs "listens on" "$(node_log scheduler)" || ! alive scheduler || [ "$t" -ge 100 ]; do
      sleep 0.1
      t=$((t + 1))
    done
    grep -qs "listens on" "$(node_log scheduler)" && return
    kill -9 "$(node_pid scheduler)" 2> /dev/null
    wait "$(node_pid scheduler)" 2> /dev/null
    attempt=$((attempt + 1))
    [ "$attempt" -lt 5 ] || fail "the scheduler never listened"
    : > "$(node_log scheduler)"
  done
}

# gen_criteo DIR ROWS: generated click data in DIR/train.txt (2 shards).
gen_criteo() {
  "$BIN" gen criteo --rows "$2" --shards 2 --test-rows 0 --out "$1" > "$WORK/gen.out" 2>&1 ||
    fail "gen criteo"
}

# have_fmnist: Fashion-MNIST is installed, or a "skipped" line and false.
have_fmnist() {
  [ -f "$FMNIST/train-images-idx3-ubyte.gz" ] && return 0
  echo "skipped: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
  return 1
}

# damaged_checkpoint_fails CKPT CONFIG WHAT NEEDLE: pstrain export and eval
# of the damaged checkpoint CKPT (CONFIG: eval's config) each exit 1 with
# one error line that contains NEEDLE, and export leaves no output file
# (WORK/bad.npz) behind. WHAT names the damage in messages.
damaged_checkpoint_fails() {
  for cmd in export eval; do
    case $cmd in
      export) "$BIN" export --checkpoint "$1" --out "$WORK/bad.npz" ;;
      eval) "$BIN" eval --config "$2" --checkpoint "$1" ;;
    esac > "$WORK/bad.out" 2> "$WORK/bad.err"
    rc=$?
    [ "$rc" = 1 ] || fail "$cmd of $3: exit $rc, expected 1: $(cat "$WORK/bad.err")"
    [ "$(wc -l < "$WORK/bad.err")" = 1 ] || fail "$cmd: expected one error line: $(cat "$WORK/bad.err")"
    grep -q "$4" "$WORK/bad.err" || fail "$cmd: the error does not name $4: $(cat "$WORK/bad.err")"
    echo "$cmd of $3: $(cat "$WORK/bad.err")"
  done
  [ ! -e "$WORK/bad.npz" ] || fail "a failed export left bad.npz"
  ! ls "$WORK" | grep -q "bad.npz.tmp" || fail "a failed export left its temporary file"
}

# job_config MODEL DATA EPOCHS CHECKPOINT_DIR [TRAIN_LINE...]: a sync job's
# config. MODEL: lenet (a 4096-image slice of Fashion-MNIST; DATA unused) or
# wide_deep (DATA: the folder gen_criteo wrote). CHECKPOINT_DIR "-": none,
# else a checkpoint every 16 steps there. Each TRAIN_LINE is added to train:.
job_config() {
  model="$1" data="$2" epochs="$3" ckpt="$4"
  shift 4
  if [ "$model" = lenet ]; then
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
parameters:
  - {match: "conv*", ps: true}
  - {match: "fc*", ps: false}
train:
  optimizer: {type: momentum, lr: 0.02, momentum: 0.9}
  seed: 3
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
  train: [$data/train.txt]
  vocab: 65536
parameters:
  - {match: "wide_emb.weight", ps: true, init_in_server: true, optimizer: {type: adagrad, lr: 1.0}}
  - {match: "deep_emb.weight", ps: true, init_in_server: true, optimizer: {type: adagrad, lr: 0.05}}
  - {match: "fc2*", ps: true}
  - {match: "fc*", ps: false}
train:
  optimizer: {type: adam, lr: 0.001}
  seed: 1
EOF
  fi
  echo "  epochs: $epochs"
  echo "  batch_size: 16"
  echo "  mode: sync"
  echo "  log_every: 1000"
  [ "$ckpt" != "-" ] && echo "  checkpoint: {dir: $ckpt, every_steps: 16, keep: 3, resume: true}"
  for line in "$@"; do echo "  $line"; done
}

# by_column < CONFIG: a Wide&Deep config of criteo-format data, read as csv
# instead, its columns naming their tables (data.columns[].table): wide_emb
# reads C1..C13, deep_emb C14..C26. Written to stdout.
by_column() {
  columns="    - {name: label, type: label}"
  i=1
  while [ $i -le 13 ]; do
    columns="$columns\n    - {name: I$i, type: dense, transform: log1p}"
    i=$((i + 1))
  done
  i=1
  while [ $i -le 26 ]; do
    table=wide_emb
    [ $i -gt 13 ] && table=deep_emb
    columns="$columns\n    - {name: C$i, type: categorical, table: $table}"
    i=$((i + 1))
  done
  sed -e 's/format: criteo/format: csv\n  delimiter: "\\t"\n  columns:\n'"$columns"'/'
}
