#!/bin/sh
# A lasting cut between one worker and one server, both still reaching the
# scheduler: the job must end, exit 1, naming the pair, within a bound the
# settings give, instead of rolling back for as long as the cut lasts.
#
# Each node runs on a host of its own (tests/tools/netns_cluster.sh: network
# namespaces on a bridge). A sync Wide&Deep job of 1 server and 2 workers
# trains with checkpoints; once it has written one, worker 1 and server 0
# get each other's address bound to a MAC address nobody has (a permanent
# neighbour entry): their packets to each other vanish, SYNs included, as
# behind a firewall that drops them. Everything else still flows. Worker
# 1's calls to server 0 go unanswered (the call deadline, twice the
# heartbeat timeout); it reports the lost peer and the job rolls back;
# after each rollback its connect to server 0 fails at the connect deadline
# (the heartbeat timeout); after train.recovery.max_failed_link_rollbacks
# rollbacks in a row with no progress the job ends.
#
# Bound: the first failure needs the call deadline (2 T) plus the node's wait
# for a verdict (2 s); each rollback then the nodes' re-registration and
# resume (a few seconds on a slow machine: 8 s allowed), the connect
# deadline (T) and that wait (2 s). With T = 2 s and 3 rollbacks: 6 + 3 x 12
# = 42 s, plus MARGIN_S for the sweep's granularity and the shutdown. Before
# the connect deadline, each rollback waited out the kernel's SYN retries
# (about 130 s) and the job never ended.
#
# Needs root (ip netns); skipped (77) where namespaces or veth pairs cannot
# be made. Usage: sh tests/link_cut_test.sh PSTRAIN_BIN
set -u
BIN="$1"
TESTS="$(cd "$(dirname "$0")" && pwd)"
WORK=$(mktemp -d)
ID_PREFIX=cut
. "$TESTS/cluster_util.sh"
. "$TESTS/tools/netns_cluster.sh"
HB_TIMEOUT_S=2
ROLLBACKS=3
MARGIN_S=20
cleanup() {
  cluster_cleanup
  netns_teardown
  [ -n "${LINK_CUT_KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap "exit 1" HUP INT TERM

netns_setup sched s0 w0 w1
# Each node on its host: scheduler on sched, server_0 on s0, worker_1 on w1.
node_prefix() {
  case "$1" in
    scheduler) h=sched ;;
    server_*) h="s${1#server_}" ;;
    worker_*) h="w${1#worker_}" ;;
  esac
  echo ip netns exec "$(netns_ns "$h")"
}

gen_criteo "$WORK/data" 8000
job_config wide_deep "$WORK/data" 100 "$WORK/ckpt" \
  "recovery: {wait_s: 30, max_failed_link_rollbacks: $ROLLBACKS}" > "$WORK/job.yaml"
export PSTRAIN_CONFIG="$WORK/job.yaml" MS_SERVER_NUM=1 MS_WORKER_NUM=2
export MS_SCHED_HOST="$(netns_addr sched)" MS_SCHED_PORT=7070
export PSTRAIN_HEARTBEAT_INTERVAL=0.2 PSTRAIN_HEARTBEAT_TIMEOUT=$HB_TIMEOUT_S
export PSTRAIN_CONNECT_TIMEOUT=10 PSTRAIN_RING_TRANSPORT=tcp

start scheduler
wait_for_count "listens on" "$(node_log scheduler)" 1 100 || fail "the scheduler never listened"
for n in server_0 worker_0 worker_1; do start "$n"; done
wait_for_count "checkpoint of step" "$(node_log worker_0)" 1 || fail "no checkpoint was written"

# The cut: each end's packets to the other go to a MAC address nobody has.
ip -n "$(netns_ns w1)" neigh replace "$(netns_addr s0)" lladdr 02:00:00:00:de:ad dev eth0 nud permanent
ip -n "$(netns_ns s0)" neigh replace "$(netns_addr w1)" lladdr 02:00:00:00:be:ef dev eth0 nud permanent
T0=$(now_ms)
echo "cut worker 1 from server 0 at step $(grep -c "checkpoint of step" "$(node_log worker_0)")x16"

bound_s=$((2 * HB_TIMEOUT_S + 2 + ROLLBACKS * (8 + HB_TIMEOUT_S + 2) + MARGIN_S))
for n in scheduler server_0 worker_0 worker_1; do
  left=$(((T0 + bound_s * 1000 - $(now_ms)) / 100))
  [ "$left" -ge 0 ] || left=0
  wait_exit "$n" "$left"
  [ "$status" = running ] &&
    fail "$n still runs $bound_s s after the cut ($(grep -c "pausing the job" "$(node_log scheduler)") rollbacks so far)"
  [ "$status" = 1 ] || fail "$n exited $status, expected 1"
done
took=$((($(now_ms) - T0) / 1000))
echo "the job ended $took s after the cut (bound $bound_s s)"

pair="worker 1 and server 0 could not reach each other in $ROLLBACKS rollbacks in a row with no progress"
grep -q "ending the job: $pair" "$(node_log scheduler)" ||
  fail "the scheduler did not end the job naming the pair"
echo "  scheduler: $(grep -m 1 "ending the job: " "$(node_log scheduler)" | cut -c 1-300)"
for n in server_0 worker_0 worker_1; do
  grep -q "the scheduler ended the job: $pair" "$(node_log "$n")" || fail "$n does not name the pair"
done
rollbacks=$(grep -c "pausing the job" "$(node_log scheduler)")
[ "$rollbacks" = "$ROLLBACKS" ] || fail "$rollbacks rollbacks, expected $ROLLBACKS"
grep -q "no answer within $HB_TIMEOUT_S.0 s" "$(node_log worker_1)" ||
  fail "worker 1's connects to server 0 did not end at the connect deadline"
echo "link_cut_test: passed"
