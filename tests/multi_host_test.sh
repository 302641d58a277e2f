#!/bin/sh
# A job across hosts: the scheduler, 2 servers and 2 workers of a sync LeNet
# job (a slice of Fashion-MNIST, checkpoints every 16 steps) each on a host
# of its own, hosts being network namespaces on a bridge
# (tests/tools/netns_cluster.sh). Each host has a second address in
# 198.19.100.0/24, and servers and workers find theirs by
# PSTRAIN_NETWORK_MASK=198.19.100.0/24 (their route to the scheduler leaves
# from the first one): peers reach them only there. The workers' ring is
# TCP. SCENARIO:
#
# weights: the job ends (exit 0 everywhere) with a final checkpoint byte for
#   byte that of the same job on 127.0.0.1 of one host (shared-memory ring);
#   every node advertised its address in the mask; a node whose host has no
#   address in the mask stops at start with exit 2 naming the mask and its
#   addresses.
# partition_long: once the job has a checkpoint, worker 1's host loses its
#   link for PARTITION_S = 3 heartbeat timeouts (T = 2 s), then gets it back.
#   The job must end within a bound, either recovered (exit 0 everywhere, the
#   scheduler logged the loss and the resume, and the final checkpoint is
#   that of the same job undisturbed: a stale worker 1 that went on pushing
#   would show) or cleanly (exit 1 everywhere, each with one error line).
#   Never does a rank go to two node ids, nor a node id to two ranks.
# partition_replaced: as partition_long, but once the scheduler counts
#   worker 1 lost, a supervisor starts a replacement (node id
#   mh-worker_1-new, rank 1) on a spare host, and once it holds rank 1 the
#   cut link comes back. The replacement holds rank 1 from then on: the old
#   worker 1 never gets it back (it is refused and exits 1, saying so in one
#   line), and the job ends with exit 0 and the undisturbed job's weights.
# partition_short: server 1's host loses its link for 1 s, a fifth of the
#   heartbeat timeout (T = 5 s): nothing changes: exit 0 everywhere, no loss
#   or pause in any log, and the final checkpoint of the undisturbed job.
#
# Bounds: every wait is bounded; a node still running past its bound fails
# the test (naming it), well within CTest's TIMEOUT. Needs root (network
# namespaces), python3 and Fashion-MNIST (Debian's dataset-fashion-mnist);
# skipped (77) without them.
# Usage: sh tests/multi_host_test.sh PSTRAIN_BIN SCENARIO
set -u
BIN="$1"
SCENARIO="$2"
TESTS="$(cd "$(dirname "$0")" && pwd)"
WORK=$(mktemp -d)
ID_PREFIX=mh
. "$TESTS/cluster_util.sh"
. "$TESTS/tools/netns_cluster.sh"
cleanup() {
  cluster_cleanup
  netns_teardown
  [ -n "${MULTI_HOST_KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

case "$SCENARIO" in
  weights | partition_long | partition_replaced | partition_short) ;;
  *) echo "unknown scenario '$SCENARIO'"; exit 2 ;;
esac
command -v python3 > /dev/null || netns_skip "python3 is not installed"
have_fmnist || exit 77

NODES="server_0 server_1 worker_0 worker_1"
# host_of NAME: the host a node runs on.
host_of() {
  case "$1" in
    scheduler) echo sched ;;
    server_*) echo "s${1#server_}" ;;
    worker_*) echo "w${1#worker_}" ;;
  esac
}
HOSTS="sched s0 s1 w0 w1"
[ "$SCENARIO" = partition_replaced ] && HOSTS="$HOSTS w1-new"
netns_setup $HOSTS
MASK=198.19.100.0/24
# mask_addr HOST: HOST's second address, in MASK.
mask_addr() {
  i=0
  for h in $HOSTS; do
    i=$((i + 1))
    [ "$h" = "$1" ] && echo "198.19.100.$i"
  done
}
for h in $HOSTS; do
  ip -n "$(netns_ns "$h")" addr add "$(mask_addr "$h")/24" dev eth0 || fail "second address on $h"
done

export MS_SERVER_NUM=2 MS_WORKER_NUM=2 PSTRAIN_HEARTBEAT_INTERVAL=0.2
case "$SCENARIO" in
  weights) EPOCHS=1 HB_TIMEOUT_S=10 ;;
  partition_long | partition_replaced) EPOCHS=4 HB_TIMEOUT_S=2 PARTITION_S=6 CUT=w1 ;;
  partition_short) EPOCHS=4 HB_TIMEOUT_S=5 PARTITION_S=1 CUT=s1 ;;
esac
export PSTRAIN_HEARTBEAT_TIMEOUT=$HB_TIMEOUT_S PSTRAIN_CONNECT_TIMEOUT=30
RECOVERY_WAIT_S=15

# run_job RUN loopback|hosts: the job, checkpointing into WORK/ckpt-RUN.
run_job() {
  RUN=$1
  job_config lenet - "$EPOCHS" "$WORK/ckpt-$RUN" "recovery: {wait_s: $RECOVERY_WAIT_S}" \
    > "$WORK/$RUN.yaml"
  export PSTRAIN_CONFIG="$WORK/$RUN.yaml"
  if [ "$2" = loopback ]; then
    node_prefix() { :; }
    unset PSTRAIN_NETWORK_MASK PSTRAIN_RING_TRANSPORT
    export MS_SCHED_HOST=127.0.0.1
    start_scheduler
  else
    node_prefix() { echo ip netns exec "$(netns_ns "$(host_of "$1")")"; }
    export MS_SCHED_HOST="$(netns_addr sched)" MS_SCHED_PORT=7070
    export PSTRAIN_NETWORK_MASK=$MASK PSTRAIN_RING_TRANSPORT=tcp
    start scheduler
    wait_for_count "listens on" "$(node_log scheduler)" 1 100 || fail "$RUN: the scheduler never listened"
  fi
  for n in $NODES; do start "$n"; done
}
# wait_all STATUS TENTHS [NAME...]: every node of RUN (or each NAME) ends
# within TENTHS/10 s of now, with STATUS.
wait_all() {
  want=$1 deadline=$(($(now_ms) + $2 * 100))
  shift 2
  [ "$#" -gt 0 ] || set -- scheduler $NODES
  for n; do
    left=$(((deadline - $(now_ms)) / 100))
    [ "$left" -ge 0 ] || left=0
    wait_exit "$n" "$left"
    [ "$status" = "$want" ] ||
      fail "$RUN: $n exited $status, expected $want (running: still runs $((($(now_ms) - T0) / 1000)) s after $EVENT)"
  done
}
# same_final RUN_A RUN_B: the newest checkpoints of both runs are at one
# step and hold the same bytes, file by file.
same_final() {
  last=$(ls -d "$WORK/ckpt-$1"/step-* 2> /dev/null | tail -n 1)
  [ -n "$last" ] || fail "$1 wrote no checkpoint"
  step=$(basename "$last")
  [ -d "$WORK/ckpt-$2/$step" ] ||
    fail "$2's newest checkpoint is $(ls "$WORK/ckpt-$2" | tail -n 1), $1's $step"
  files=$(ls "$last")
  for f in $files; do
    case "$f" in
      server-*.ckpt) python3 "$TESTS/tools/ckpt_same.py" "$last/$f" "$WORK/ckpt-$2/$step/$f" ;;
      MANIFEST) true ;; # it holds the CRCs of the files compared here
      *) cmp -s "$last/$f" "$WORK/ckpt-$2/$step/$f" ;;
    esac || fail "$step/$f differs between $1 and $2"
  done
  echo "$1 and $2 end with the same checkpoint: $(echo $files | wc -w) files of $step"
}
# one_rank_per_node RUN: in the scheduler's log, each rank went to one node
# id and each node id to one rank (MindSpore's "assign rank id" lines, and
# "keeps rank id" on registering again). Where no replacement is started,
# anything else is two nodes holding one rank.
one_rank_per_node() {
  log=$(node_log scheduler)
  sed -n 's/.*The \([a-z]*\) node id:\([^,]*\),node ip: .* rank id:\([0-9]*\).*/\1 \3 \2/p' \
    "$log" | sort -u > "$WORK/ranks"
  [ -s "$WORK/ranks" ] || fail "$1: no rank assignment in the scheduler's log"
  dup=$(awk '{ print $1, $2 }' "$WORK/ranks" | sort | uniq -d)
  [ -z "$dup" ] || fail "$1: $dup went to two nodes: $(cat "$WORK/ranks")"
  dup=$(awk '{ print $3 }' "$WORK/ranks" | sort | uniq -d)
  [ -z "$dup" ] || fail "$1: node $dup got two ranks: $(cat "$WORK/ranks")"
}

if [ "$SCENARIO" = weights ]; then
  # A host with no address in the mask says so, before it opens a socket.
  netns_exec w0 env MS_ROLE=MS_WORKER MS_SCHED_HOST="$(netns_addr sched)" MS_SCHED_PORT=7070 \
    PSTRAIN_NETWORK_MASK=10.99.0.0/16 "$BIN" > "$WORK/nomatch.out" 2> "$WORK/nomatch.err"
  rc=$?
  [ "$rc" = 2 ] || fail "a node with no address in its mask exited $rc, expected 2"
  [ "$(wc -l < "$WORK/nomatch.err")" = 1 ] || fail "expected one error line: $(cat "$WORK/nomatch.err")"
  grep -q "no interface has an address in 10.99.0.0/16; this host has .*$(netns_addr w0) (eth0)" \
    "$WORK/nomatch.err" || fail "the error names not the mask and the addresses: $(cat "$WORK/nomatch.err")"
  echo "no address in the mask: exit 2: $(cat "$WORK/nomatch.err")"

  mark "the start"
  run_job loopback loopback
  wait_all 0 1200
  echo "loopback run: done"
  mark "the start"
  run_job hosts hosts
  wait_all 0 1200
  echo "hosts run: done"
  for n in $NODES; do
    addr=$(mask_addr "$(host_of "$n")")
    grep -q "advertising $addr (eth0), in the network mask $MASK" "$(node_log "$n")" ||
      fail "$n did not advertise $addr, its address in $MASK"
    grep -q "The ${n%_*} node id:$ID_PREFIX-$n,node ip: $addr," "$(node_log scheduler)" ||
      fail "the scheduler did not register $n at $addr"
  done
  echo "every node advertised its address in $MASK"
  expect_line worker_0 "ring: TCP among the workers"
  same_final loopback hosts
  echo "multi_host_test weights: passed"
  exit 0
fi

# The partitions: the undisturbed job, then the same job with a cut.
mark "the start"
run_job clean hosts
wait_all 0 1200
echo "undisturbed run: done"
mark "the start"
run_job cut hosts
wait_for_count "checkpoint of step 16" "$(node_log worker_0)" 1 600 || fail "no checkpoint was written"
netns_cut "$CUT" || fail "cannot cut $CUT's link"
mark "the cut"
if [ "$SCENARIO" = partition_replaced ]; then
  wait_for_count "lost the worker node id:$ID_PREFIX-worker_1 " "$(node_log scheduler)" 1 100 ||
    fail "the scheduler did not count worker 1 lost within 10 s of the cut"
  start worker_1-new
  wait_for_count "node id:$ID_PREFIX-worker_1-new,.* rank id:1" "$(node_log scheduler)" 1 300 ||
    fail "the replacement of worker 1 did not get rank 1 within 30 s"
  echo "worker 1's replacement holds rank 1 after $(($(now_ms) - T0)) ms of the cut"
  NODES="$NODES worker_1-new"
else
  sleep "$PARTITION_S"
fi
netns_restore "$CUT" || fail "cannot restore $CUT's link"
# A sync job cannot finish without the cut node: one whose scheduler ended
# meanwhile ended before the cut, and the partition tested nothing.
alive scheduler || fail "the job ended before the link came back (too short to be cut)"
echo "cut $CUT's link for $(($(now_ms) - T0)) ms (heartbeat timeout $HB_TIMEOUT_S s)"
mark "the link came back"
sched_log=$(node_log scheduler)

if [ "$SCENARIO" = partition_short ]; then
  # The rest of the job: 4 epochs on a busy machine take well under 60 s.
  wait_all 0 900
  for n in scheduler $NODES; do
    ! grep -E "lost|pausing|rolling back|roll back" "$(node_log "$n")" ||
      fail "a partition of $PARTITION_S s, under the $HB_TIMEOUT_S s timeout, changed something in $n"
  done
  one_rank_per_node cut
  same_final clean cut
  echo "multi_host_test partition_short: passed"
  exit 0
fi

if [ "$SCENARIO" = partition_replaced ]; then
  # The job goes on with the replacement (well under 90 s); the old worker
  # 1 is refused once its link is back, within its rejoin deadline.
  wait_all 0 900 scheduler server_0 server_1 worker_0 worker_1-new
  wait_all 1 300 worker_1
  errors=$(grep -c "\[error\]" "$(node_log worker_1)")
  [ "$errors" = 1 ] || fail "the old worker 1 ended with $errors error lines, expected one"
  expect_line worker_1 "\[error\]"
  # Rank 1 went to the replacement once, and never back to the old node id.
  lines=$(grep -n "The worker node id:.* rank id:1" "$sched_log")
  new_at=$(echo "$lines" | grep -m 1 "node id:$ID_PREFIX-worker_1-new," | cut -d: -f1)
  old_after=$(echo "$lines" | grep "node id:$ID_PREFIX-worker_1," | awk -F: -v n="$new_at" '$1 > n')
  [ -z "$old_after" ] || fail "rank 1 went back to the old worker 1 after its replacement held it: $old_after"
  same_final clean cut
  echo "multi_host_test partition_replaced: passed"
  exit 0
fi

# Long: the bound after the link comes back. Recovery: worker 1 rejoins
# (a retry every 0.2 s, a connect), everyone rolls back to a checkpoint and
# the rest of the job runs (well under 60 s). A clean end: the scheduler's
# wait for a replacement (RECOVERY_WAIT_S) and the shutdown. Either: 90 s.
wait_exit scheduler 900
case "$status" in
  0 | 1) wait_all "$status" 300 $NODES ;;
  running) fail "the scheduler still runs 90 s after the link came back" ;;
  *) fail "the scheduler exited $status" ;;
esac
grep -q "lost the worker node id:$ID_PREFIX-worker_1 (rank 1," "$sched_log" ||
  fail "the scheduler never noticed worker 1's partition of $PARTITION_S s (timeout $HB_TIMEOUT_S s)"
expect_line scheduler "lost the worker node id:$ID_PREFIX-worker_1 (rank 1,"
one_rank_per_node cut
if [ "$status" = 0 ]; then
  expect_line scheduler "the job resumes"
  expect_line worker_1 "rolling back"
  same_final clean cut
  echo "multi_host_test partition_long: passed (recovered)"
else
  for n in scheduler $NODES; do
    errors=$(grep -c "\[error\]" "$(node_log "$n")")
    [ "$errors" = 1 ] || fail "$n ended with $errors error lines, expected one"
    expect_line "$n" "\[error\]"
  done
  echo "multi_host_test partition_long: passed (a clean end)"
fi
