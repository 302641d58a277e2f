#!/bin/sh
# Failures a user meets: a 2-server,
# 2-worker sync Wide&Deep job on generated click data, separate processes on
# 127.0.0.1, with short heartbeats (interval 0.2 s, timeout 2 s; the
# scheduler rejoin and the registration deadline 2 s) so that each case takes
# seconds. Each case asserts what the user would notice, within a stated
# margin (MARGIN_S past what the settings allow), and everything it started
# is killed with SIGKILL when it ends.
#
# CASE:
#   server_kill        kill -9 of a server, no checkpoints, default heartbeat
#                      settings: the job ends within MARGIN_S, not after the
#                      30 s heartbeat timeout, and every process says why.
#   server_stop        SIGSTOP of a server, no checkpoints: the others exit 1
#                      within the heartbeat timeout + MARGIN_S, naming it; woken
#                      after that, it exits 1 by itself.
#   worker_stop        the same for a worker.
#   scheduler_stop     SIGSTOP of the scheduler: every node notices, tries to
#                      rejoin for PSTRAIN_CONNECT_TIMEOUT, and exits 1.
#   scheduler_stall    checkpoints on: the scheduler stopped for twice the
#                      heartbeat timeout mid-job, then woken (a paused VM, a
#                      starved CPU): it blames no node (its own stall gives
#                      every node a fresh timeout), the nodes rejoin it, and
#                      the job completes, exit 0, with no rollback.
#   launch_ids         launch/*.sh with MS_NODE_ID exported: ids
#                      <id>-server-<i> / <id>-worker-<i>, the job completes.
#   register_deadline  half the nodes never start: at PSTRAIN_REGISTER_TIMEOUT
#                      the job ends naming the missing ranks.
#   duplicate_rank     a second node asking for a held MS_NODE_RANK is refused
#                      with the rank named; the job it tried to join completes.
#   recover_stop       checkpoints on: SIGSTOP of a worker pauses the job; woken,
#                      it rolls back with the others and the job completes.
#   recover_new_node   checkpoints on: a worker killed, and a new node (another
#                      node id, no rank asked for) takes its rank; the job
#                      completes, and after the rollback each node was sent
#                      only the peers that changed (the newcomer all of its).
#   recover_timeout    checkpoints on, train.recovery.wait_s 3: a worker killed
#                      and not replaced ends the job, naming its rank.
#   fault_close        checkpoints on, PSTRAIN_TEST_FAULT=close:N on a worker:
#                      a connection between two live nodes breaks; the worker
#                      asks for a rollback and the job completes.
#   fault_drop         the same with a push frame never sent: the call's
#                      deadline (twice the heartbeat timeout) ends the wait.
#   fault_delay        a push held 1 s (under the heartbeat timeout): nothing
#                      is lost, nothing rolls back, the job completes.
# Usage: sh tests/failure_test.sh PSTRAIN_BIN CASE
set -u
BIN="$1"
CASE="$2"
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
. "$REPO/tests/cluster_util.sh"
trap 'cluster_cleanup; rm -rf "$WORK"' EXIT
trap "exit 1" HUP INT TERM PIPE
[ -n "${FAILURE_KEEP:-}" ] && trap 'cluster_cleanup' EXIT
echo "failure_test: $CASE in $WORK"

MARGIN_S=5
HB_TIMEOUT_S=2
CONNECT_S=2
export MS_SERVER_NUM=2 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1 ID_PREFIX=ft
export PSTRAIN_HEARTBEAT_INTERVAL=0.2 PSTRAIN_HEARTBEAT_TIMEOUT=$HB_TIMEOUT_S
export PSTRAIN_CONNECT_TIMEOUT=$CONNECT_S
NODES="server_0 server_1 worker_0 worker_1"
gen_criteo "$WORK/data" 8000

# config NAME EPOCHS CKPT [TRAIN_LINE...]: writes WORK/NAME.yaml, exports it.
config() {
  name=$1
  shift
  job_config wide_deep "$WORK/data" "$@" > "$WORK/$name.yaml"
  export PSTRAIN_CONFIG="$WORK/$name.yaml"
}

# start_job: the scheduler and every node; returns once both workers train.
start_job() {
  start_scheduler
  for n in $NODES; do start "$n"; done
  for w in worker_0 worker_1; do
    wait_for_count "trains" "$(node_log "$w")" 1 || fail "$w never began to train"
  done
}

# others VICTIM: every process but VICTIM.
others() { for n in scheduler $NODES; do [ "$n" = "$1" ] || echo "$n"; done; }

# A node stopped without checkpoints: VICTIM (server_1 or worker_1).
stopped_node() {
  victim=$1
  config job 100 -
  start_job
  kill -STOP "$(node_pid "$victim")"
  mark "SIGSTOP of $victim"
  role=${victim%_*}
  expect_exit_by $((T0 + (HB_TIMEOUT_S + MARGIN_S) * 1000)) 1 $(others "$victim")
  echo "  the others ended $((($(now_ms) - T0) / 100)) tenths of a second after $EVENT"
  expect_line scheduler "lost the $role node id:$ID_PREFIX-$victim (rank 1.*it has sent no heartbeat"
  for n in $(others "$victim"); do
    [ "$n" = scheduler ] || expect_line "$n" "the scheduler ended the job: lost the $role rank 1"
  done
  # Woken after the job ended, it finds the scheduler gone and exits.
  kill -CONT "$(node_pid "$victim")"
  mark "SIGCONT of $victim"
  expect_exit_by $((T0 + (HB_TIMEOUT_S + CONNECT_S + MARGIN_S) * 1000)) 1 "$victim"
}

case "$CASE" in
  server_kill)
    # The default heartbeat settings: the loss must not wait for their timeout.
    unset PSTRAIN_HEARTBEAT_INTERVAL PSTRAIN_HEARTBEAT_TIMEOUT
    config job 100 -
    start_job
    kill -9 "$(node_pid server_1)"
    mark "kill -9 of server_1"
    expect_exit_by $((T0 + MARGIN_S * 1000)) 1 $(others server_1)
    echo "  the others ended $((($(now_ms) - T0) / 100)) tenths of a second after $EVENT"
    expect_line scheduler "ending the job: lost the server rank 1 (node id $ID_PREFIX-server_1)"
    for n in server_0 worker_0 worker_1; do
      expect_line "$n" "the scheduler ended the job: lost the server rank 1"
    done
    ;;
  server_stop) stopped_node server_1 ;;
  worker_stop) stopped_node worker_1 ;;
  scheduler_stop)
    # The rejoin's TCP connect to a stopped scheduler succeeds (the kernel
    # accepts into the listen backlog) but is never answered: the rejoin as
    # a whole has the connect timeout.
    config job 100 -
    start_job
    kill -STOP "$(node_pid scheduler)"
    mark "SIGSTOP of the scheduler"
    expect_exit_by $((T0 + (HB_TIMEOUT_S + CONNECT_S + MARGIN_S) * 1000)) 1 $NODES
    echo "  the nodes ended $((($(now_ms) - T0) / 100)) tenths of a second after $EVENT"
    for n in $NODES; do
      expect_line "$n" "the scheduler has been silent"
      expect_line "$n" "trying to rejoin it for up to $CONNECT_S s"
    done
    ;;
  scheduler_stall)
    # The nodes give the stopped scheduler up after the heartbeat timeout
    # and try to rejoin it for the connect timeout (longer than the stall).
    export PSTRAIN_CONNECT_TIMEOUT=30
    STALL_S=$((2 * HB_TIMEOUT_S))
    config job 3 "$WORK/ckpt" "recovery: {wait_s: 60}"
    start_job
    wait_for_count "checkpoint of step" "$(node_log worker_0)" 1 || fail "no checkpoint was written"
    kill -STOP "$(node_pid scheduler)"
    sleep "$STALL_S"
    kill -CONT "$(node_pid scheduler)"
    mark "SIGCONT of the scheduler after $STALL_S s"
    expect_exit_by $((T0 + 120000)) 0 scheduler $NODES
    for n in $NODES; do
      ! grep -q "rolling back" "$(node_log "$n")" ||
        fail "$n rolled back: $(grep -m 1 -B 1 "rolling back" "$(node_log "$n")" | head -n 1 | cut -c 1-300)"
    done
    expect_line scheduler "the scheduler was stalled for"
    ;;
  launch_ids)
    config job 1 "$WORK/ckpt" "steps: 48"
    export PSTRAIN_BIN="$BIN" PSTRAIN_LOG_DIR="$WORK" MS_NODE_ID=job
    # The scripts run the processes in the background and write NAME.exit.
    attempt=0
    while :; do
      export MS_SCHED_PORT=$(pick_port "$attempt")
      sh "$REPO/launch/Scheduler.sh" > /dev/null
      wait_for_count "listens on" "$WORK/scheduler.log" 1 50 && break
      attempt=$((attempt + 1))
      [ "$attempt" -lt 5 ] || fail "the scheduler never listened"
    done
    sh "$REPO/launch/Server.sh" > /dev/null
    sh "$REPO/launch/Worker.sh" > /dev/null
    for n in scheduler $NODES; do
      wait_for_count . "$WORK/$n.exit" 1 1200 || fail "$n still runs after 120 s"
      [ "$(cat "$WORK/$n.exit")" = 0 ] || fail "$n exited $(cat "$WORK/$n.exit")"
    done
    for n in $NODES; do
      role=${n%_*} rank=${n#*_}
      expect_line scheduler "The $role node id:job-$role-$rank,node ip: 127.0.0.1,.* rank id:$rank\$"
      expect_line "$n" "stops: the job is over"
    done
    ;;
  register_deadline)
    # A Shutdown that comes while a node waits in Join for the topology
    # ends that wait too.
    export PSTRAIN_REGISTER_TIMEOUT=2
    config job 1 -
    start_scheduler
    mark "the scheduler's start"
    start server_0
    start worker_0
    expect_exit_by $((T0 + (2 + MARGIN_S) * 1000)) 1 scheduler server_0 worker_0
    missing="missing server rank 1, worker rank 1"
    expect_line scheduler "ending the job: not every node registered within 2 s (PSTRAIN_REGISTER_TIMEOUT): $missing"
    for n in server_0 worker_0; do expect_line "$n" "the scheduler ended the job: .*$missing"; done
    ;;
  duplicate_rank)
    config job 1 - "steps: 32"
    start_scheduler
    for n in server_0 server_1 worker_0; do start "$n"; done
    wait_for_count "node id:$ID_PREFIX-server_1,.*rank id:1" "$(node_log scheduler)" 1 ||
      fail "server_1 never registered"
    start server_1-again
    mark "the start of a second server asking for rank 1"
    expect_exit_by $((T0 + MARGIN_S * 1000)) nonzero server_1-again
    expect_line server_1-again "refused this node: asks for server rank 1, which node id:$ID_PREFIX-server_1 already holds"
    expect_line scheduler "refused server node id:$ID_PREFIX-server_1-again"
    start worker_1
    mark "the start of worker_1"
    expect_exit_by $((T0 + 120000)) 0 scheduler $NODES
    ;;
  recover_stop)
    config job 3 "$WORK/ckpt" "recovery: {wait_s: 60}"
    start_job
    wait_for_count "checkpoint of step" "$(node_log worker_0)" 1 || fail "no checkpoint was written"
    kill -STOP "$(node_pid worker_1)"
    mark "SIGSTOP of worker_1"
    wait_for_count "pausing the job" "$(node_log scheduler)" 1 $(((HB_TIMEOUT_S + MARGIN_S) * 10)) ||
      fail "the scheduler did not pause the job within $((HB_TIMEOUT_S + MARGIN_S)) s of $EVENT"
    expect_line scheduler "lost the worker node id:$ID_PREFIX-worker_1 (rank 1.*it has sent no heartbeat"
    # The others roll back and register again; then the worker wakes.
    wait_for_count "registered again, keeps" "$(node_log scheduler)" 3 $((MARGIN_S * 10)) ||
      fail "the other nodes did not register again within $MARGIN_S s of the pause"
    kill -CONT "$(node_pid worker_1)"
    mark "SIGCONT of worker_1"
    expect_exit_by $((T0 + 120000)) 0 scheduler $NODES
    expect_line worker_1 "rolling back"
    expect_line worker_1 "resuming at step"
    expect_line scheduler "the job resumes"
    ;;
  recover_new_node)
    # The lost rank goes to any new node of its role: another node id, no
    # rank asked for.
    config job 3 "$WORK/ckpt" "recovery: {wait_s: 60}"
    start_job
    wait_for_count "checkpoint of step" "$(node_log worker_0)" 1 || fail "no checkpoint was written"
    kill -9 "$(node_pid worker_1)"
    wait "$(node_pid worker_1)" 2> /dev/null
    mark "kill -9 of worker_1"
    wait_for_count "pausing the job" "$(node_log scheduler)" 1 $((MARGIN_S * 10)) ||
      fail "the scheduler did not pause the job within $MARGIN_S s of $EVENT"
    (
      export MS_ROLE=MS_WORKER MS_NODE_ID=ft-newcomer
      unset MS_NODE_RANK
      exec "$BIN" >> "$(node_log newcomer)" 2>&1
    ) &
    echo $! > "$WORK/newcomer.pid"
    expect_exit_by $((T0 + 120000)) 0 scheduler server_0 server_1 worker_0 newcomer
    expect_line scheduler "The worker node id:ft-newcomer,.* assign rank id:1 (replaces the lost node)"
    expect_line newcomer "resuming at step"
    expect_line scheduler "the job resumes"
    # The nodes that rolled back kept their topology and their ports: each
    # gets only what changed, the newcomer its whole list.
    expect_line worker_0 "topology of generation 1: 1 of 3 peers changed .a delta from generation 0"
    expect_line server_0 "topology of generation 1: 0 of 0 peers changed"
    expect_line server_1 "topology of generation 1: 0 of 0 peers changed"
    expect_line newcomer "topology of generation 1: the whole list of 3 peers"
    ;;
  recover_timeout)
    # The nodes that rolled back and registered again wait in Join for a
    # topology that never comes, until the Shutdown ends the wait.
    config job 100 "$WORK/ckpt" "recovery: {wait_s: 3}"
    start_job
    kill -9 "$(node_pid worker_1)"
    mark "kill -9 of worker_1"
    expect_exit_by $((T0 + (3 + MARGIN_S) * 1000)) 1 $(others worker_1)
    echo "  the others ended $((($(now_ms) - T0) / 100)) tenths of a second after $EVENT"
    expect_line scheduler "pausing the job"
    missing="no replacement registered within 3 s (train.recovery.wait_s): missing worker rank 1"
    expect_line scheduler "ending the job: .*$missing"
    for n in server_0 server_1 worker_0; do expect_line "$n" "the scheduler ended the job: .*$missing"; done
    ;;
  fault_close | fault_drop | fault_delay)
    config job 4 "$WORK/ckpt"
    case "$CASE" in
      fault_close) fault=close:300 why="test fault" ;;
      fault_drop) fault=drop:300 why="has not answered SparsePushRequest within 4.0 s" ;;
      fault_delay) fault=delay:300:1000 ;;
    esac
    start_scheduler
    for n in server_0 server_1 worker_0; do start "$n"; done
    export PSTRAIN_TEST_FAULT=$fault
    start worker_1
    unset PSTRAIN_TEST_FAULT
    mark "the start"
    expect_exit_by $((T0 + 120 * 1000)) 0 scheduler $NODES
    expect_line worker_1 "test fault: "
    if [ "$CASE" = fault_delay ]; then
      grep -q "pausing the job" "$(node_log scheduler)" && fail "a 1 s delay rolled the job back"
    else
      expect_line scheduler "worker node id:$ID_PREFIX-worker_1 (rank 1.*failed: .*$why"
      expect_line scheduler "pausing the job"
      expect_line scheduler "the job resumes"
    fi
    ;;
  *) echo "unknown case '$CASE'"; exit 2 ;;
esac
echo "failure_test: $CASE passed"
