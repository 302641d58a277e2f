#!/bin/sh
# Chaos: a 2-server, 2-worker sync job, started as separate
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
# process: every process must exit 3, and the job is started again, resuming).
# Usage: sh tests/chaos_test.sh PSTRAIN_BIN SCENARIO [KILLS] [SEED]
set -u
BIN="$1"
SCENARIO="$2"
KILLS="${3:-5}"
SEED="${4:-$$}"
WORK=$(mktemp -d)
. "$(dirname "$0")/cluster_util.sh"
cleanup() {
  cluster_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
[ -n "${CHAOS_KEEP:-}" ] && trap - EXIT
echo "chaos_test: $SCENARIO, $KILLS kills, seed $SEED, in $WORK"

# rand K: a number from 0 to 9999, the K-th of this seed.
rand() { awk -v s="$SEED" -v k="$1" 'BEGIN { srand(s * 100 + k); printf "%d", rand() * 10000 }'; }

command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }
case "$SCENARIO" in
  lenet) have_fmnist || exit 77 ;;
  wide_deep | scheduler | sigterm) gen_criteo "$WORK/data" 8000 ;;
  *) echo "unknown scenario '$SCENARIO'"; exit 2 ;;
esac

# config DIR: the job, checkpointing into DIR.
model=lenet
[ "$SCENARIO" = lenet ] || model=wide_deep
# Killing the scheduler costs the job little time: its kills need more steps.
# So do SIGTERM's stops, each after up to 1.2 s of training at a few hundred
# steps a second, and LeNet on its slice, whose restarts read only the slice.
epochs=8
[ "$SCENARIO" = scheduler ] && epochs=24
[ "$SCENARIO" = sigterm ] && epochs=16
[ "$SCENARIO" = lenet ] && epochs=24
config() { job_config "$model" "$WORK/data" "$epochs" "$1"; }

export MS_SERVER_NUM=2 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1
export PSTRAIN_CONNECT_TIMEOUT=60 PSTRAIN_HEARTBEAT_TIMEOUT=10
NODES="server_0 server_1 worker_0 worker_1"

# wait_all [STATUS]: every process of the current incarnation ends (at most
# 300 s); fails unless each exits STATUS (default 0).
wait_all() {
  for n in scheduler $NODES; do
    wait_exit "$n" 3000
    [ "$status" = "${1:-0}" ] ||
      fail "$RUN: $n exited $status, expected ${1:-0} (running: still runs after 300 s)"
  done
}
run_job() {  # RUN: clean or chaos
  RUN=$1
  config "$WORK/ckpt-$RUN" > "$WORK/$RUN.yaml"
  export PSTRAIN_CONFIG="$WORK/$RUN.yaml"
  start_scheduler
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
    kill -TERM "$(node_pid "$victim")"
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
