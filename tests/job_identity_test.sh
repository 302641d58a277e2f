#!/bin/sh
# One job, one config, one truth: a job never takes another job's
# checkpoints for its own, and every node of a job runs the same config.
# A 2-server, 2-worker sync Wide&Deep job on generated click data, separate
# processes on 127.0.0.1 (tests/cluster_util.sh), short heartbeats. Job A
# (adam lr 0.001) and job B (lr 0.002) differ only in the learning rate.
#
# CASE:
#   reused_dir        B started in A's finished checkpoint directory: with
#                     resume false, and with resume true, every process
#                     exits non-zero at the start, naming the directory and
#                     A's step; A's steps are left as they were.
#   rollback_foreign  B runs in its own directory; A's last step is copied
#                     in (a newer step number than any of B's); a server is
#                     killed and restarted. The rollback takes B's newest
#                     step, not A's, the job completes (exit 0), and A's
#                     step is still there, untouched (never pruned).
#   foreign_server    B runs; a server is killed and restarted with a config
#                     whose checkpoint.dir is A's directory. The nodes do not
#                     agree on the step to resume from: the job ends (exit 1)
#                     within MARGIN_S, naming both steps; A's steps untouched.
#   config_mismatch   B's scheduler, a server and a worker; then a server
#                     with another lr, a worker with another seed and one
#                     with another batch size are each refused at once,
#                     naming the key and both values. The right nodes then
#                     join and the job completes.
#   first_node        a scheduler started without a config takes the first
#                     admitted node's: a server with another lr is refused,
#                     naming that node, and the job of the right nodes
#                     completes.
#   readonly_dir      train.checkpoint.dir on a read-only file system: every
#                     process exits non-zero at the start, naming the
#                     directory, before any step (not at the first
#                     checkpoint). Skipped where tmpfs cannot be mounted.
# Usage: sh tests/job_identity_test.sh PSTRAIN_BIN CASE
set -u
BIN="$1"
CASE="$2"
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
. "$REPO/tests/cluster_util.sh"
trap 'cluster_cleanup; rm -rf "$WORK"' EXIT
trap "exit 1" HUP INT TERM PIPE
echo "job_identity_test: $CASE in $WORK"

MARGIN_S=10
export MS_SERVER_NUM=2 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1 ID_PREFIX=ji
export PSTRAIN_HEARTBEAT_INTERVAL=0.2 PSTRAIN_HEARTBEAT_TIMEOUT=2 PSTRAIN_CONNECT_TIMEOUT=2
NODES="server_0 server_1 worker_0 worker_1"
gen_criteo "$WORK/data" 4000

# write_config NAME LR EPOCHS CKPT RESUME [TRAIN_LINE...]: WORK/NAME.yaml.
write_config() {
  name=$1 lr=$2 epochs=$3 ckpt=$4 resume=$5
  shift 5
  if [ "$ckpt" != - ]; then set -- "recovery: {wait_s: 60}" "$@"; fi
  job_config wide_deep "$WORK/data" "$epochs" "$ckpt" "$@" |
    sed "s/lr: 0.001/lr: $lr/; s/resume: true/resume: $resume/" > "$WORK/$name.yaml"
}
use() { export PSTRAIN_CONFIG="$WORK/$1.yaml"; }

# run_job_a: job A to its end in WORK/ckpt_a; snapshot of its steps in
# WORK/a.sum.
run_job_a() {
  write_config a 0.001 2 "$WORK/ckpt_a" false
  use a
  RUN=a
  start_scheduler
  for n in $NODES; do start "$n"; done
  mark "job A's start"
  expect_exit_by $((T0 + 120000)) 0 scheduler $NODES
  RUN=
  a_sum >"$WORK/a.sum"
  [ -s "$WORK/a.sum" ] || fail "job A wrote no checkpoint"
}
a_sum() { (cd "$WORK/ckpt_a" && find . -type f | sort | xargs md5sum); }
expect_a_untouched() {
  a_sum | cmp -s - "$WORK/a.sum" || fail "job A's checkpoint directory was changed"
  echo "  job A's $(grep -c MANIFEST "$WORK/a.sum") steps are as they were"
}
newest_step() { ls "$1" | grep '^step-' | sort | tail -n 1; }

# start_b: job B's scheduler and nodes; returns once it wrote a checkpoint.
start_b() {
  start_scheduler
  for n in $NODES; do start "$n"; done
  wait_for_count "checkpoint of step" "$(node_log worker_0)" 1 600 || fail "job B wrote no checkpoint"
}

case "$CASE" in
  reused_dir)
    run_job_a
    a_step=$(newest_step "$WORK/ckpt_a")
    for resume in false true; do
      RUN=b_$resume
      write_config b 0.002 1 "$WORK/ckpt_a" "$resume"
      use b
      start_scheduler
      for n in $NODES; do start "$n"; done
      mark "job B's start (resume $resume)"
      expect_exit_by $((T0 + MARGIN_S * 1000)) nonzero scheduler $NODES
      if [ "$resume" = false ]; then
        expect_line server_0 "train.checkpoint.dir $WORK/ckpt_a already holds .*$a_step and train.checkpoint.resume is false"
        expect_line worker_1 "use a fresh directory, or set train.checkpoint.resume: true"
      else
        expect_line server_1 "train.checkpoint.dir $WORK/ckpt_a holds step [0-9]* of another job (train.optimizer.lr is 0.001 there, 0.002 in"
        expect_line worker_0 "of another job"
      fi
      ! grep -q "epoch: 1 step:" "$(node_log worker_0)" || fail "job B trained"
      expect_a_untouched
    done
    ;;
  rollback_foreign)
    run_job_a
    a_step=$(newest_step "$WORK/ckpt_a")
    # Job B runs 3 epochs (A ran 2): its steps stay below A's last step
    # number until well after the rollback.
    write_config b 0.002 3 "$WORK/ckpt_b" false
    use b
    start_b
    cp -r "$WORK/ckpt_a/$a_step" "$WORK/ckpt_b/"
    b_step=$(ls "$WORK/ckpt_b" | grep '^step-' | sort | grep -v "$a_step" | tail -n 1)
    kill -9 "$(node_pid server_1)"
    wait "$(node_pid server_1)" 2> /dev/null
    start server_1
    mark "kill -9 and restart of server_1"
    expect_exit_by $((T0 + 180000)) 0 scheduler $NODES
    expect_line scheduler "the job resumes"
    expect_line server_1 "checkpoint skipped: .*$a_step: another job's checkpoint (train.optimizer.lr is 0.001 there, 0.002 in this job)"
    a_number=$(echo "${a_step#step-}" | sed 's/^0*//')
    ! grep -q "resum.*$a_step\|resuming at step $a_number" "$WORK"/*.log ||
      fail "a node resumed from job A's $a_step: $(grep -h "resum.*$a_step" "$WORK"/*.log | head -n 2)"
    expect_line worker_0 "resuming at step"
    echo "  job B's newest step at the kill: $b_step; A's step in B's directory: $a_step"
    cmp -s "$WORK/ckpt_a/$a_step/MANIFEST" "$WORK/ckpt_b/$a_step/MANIFEST" ||
      fail "job A's $a_step in job B's directory was changed or pruned"
    ;;
  foreign_server)
    run_job_a
    a_step=$(newest_step "$WORK/ckpt_a")
    write_config b 0.002 3 "$WORK/ckpt_b" false
    write_config b_on_a 0.002 3 "$WORK/ckpt_a" false
    use b
    start_b
    kill -9 "$(node_pid server_1)"
    wait "$(node_pid server_1)" 2> /dev/null
    use b_on_a
    start server_1
    mark "kill -9 of server_1, restarted with job A's checkpoint directory"
    expect_exit_by $((T0 + MARGIN_S * 1000)) 1 scheduler $NODES
    expect_line server_1 "checkpoint skipped: .*another job's checkpoint"
    # Whichever node tells the scheduler first names its step and the range.
    expect_line scheduler "resumes from step [0-9]* (.*), but the nodes' newest checkpoints of this job range from step 0 to [1-9]"
    ! grep -q "resumed .* from $WORK/ckpt_a" "$(node_log server_1)" || fail "server 1 loaded job A's weights"
    expect_a_untouched
    ;;
  config_mismatch)
    write_config b 0.002 1 - false
    write_config lr 0.5 1 - false
    write_config seed 0.002 1 - false
    sed -i 's/seed: 1/seed: 2/' "$WORK/seed.yaml"
    write_config batch 0.002 1 - false
    sed -i 's/batch_size: 16/batch_size: 32/' "$WORK/batch.yaml"
    use b
    start_scheduler
    start server_0
    start worker_0
    for odd in server_1:lr:train.optimizer.lr:0.5:0.002 worker_1:seed:train.seed:2:1 \
      worker_1:batch:train.batch_size:32:16; do
      IFS=: read -r name file key mine theirs <<EOF
$odd
EOF
      RUN=$file
      use "$file"
      start "$name"
      mark "$name with $key $mine"
      expect_exit_by $((T0 + MARGIN_S * 1000)) nonzero "$name"
      expect_line "$name" "its config differs from the scheduler's ($WORK/b.yaml): $key is $mine on this node, $theirs there"
      RUN=
      expect_line scheduler "refused .*: its config differs .*$key is $mine on this node"
    done
    use b
    start server_1
    start worker_1
    mark "the right server_1 and worker_1"
    expect_exit_by $((T0 + 120000)) 0 scheduler $NODES
    ;;
  first_node)
    write_config b 0.002 1 - false
    write_config lr 0.5 1 - false
    unset PSTRAIN_CONFIG
    start_scheduler
    use b
    start server_0
    wait_for_count "node id:ji-server_0.*assign rank id:0" "$(node_log scheduler)" 1 ||
      fail "server_0 was not admitted"
    RUN=lr
    use lr
    start server_1
    mark "server_1 with lr 0.5"
    expect_exit_by $((T0 + MARGIN_S * 1000)) nonzero server_1
    expect_line server_1 "its config differs from the first node's (server node id:ji-server_0): train.optimizer.lr is 0.5 on this node, 0.002 there"
    RUN=
    use b
    for n in server_1 worker_0 worker_1; do start "$n"; done
    mark "the right nodes"
    expect_exit_by $((T0 + 120000)) 0 scheduler server_0 server_1 worker_0 worker_1
    ;;
  readonly_dir)
    mkdir -p "$WORK/ro"
    mount -t tmpfs -o ro,size=1m pstrain-test "$WORK/ro" 2> /dev/null || {
      echo "skipped: cannot mount a read-only tmpfs here"
      exit 77
    }
    trap 'cluster_cleanup; umount "$WORK/ro"; rm -rf "$WORK"' EXIT
    write_config b 0.002 1 "$WORK/ro" false
    use b
    start_scheduler
    for n in $NODES; do start "$n"; done
    mark "the job's start"
    expect_exit_by $((T0 + MARGIN_S * 1000)) nonzero scheduler $NODES
    expect_line server_0 "train.checkpoint.dir: $WORK/ro: not writable: Read-only file system"
    expect_line worker_0 "not writable: Read-only file system"
    ! grep -q "epoch: 1 step:" "$(node_log worker_0)" || fail "the job trained before it failed"
    ;;
  *)
    echo "unknown case $CASE"
    exit 2
    ;;
esac
echo "job_identity_test: $CASE passed"
