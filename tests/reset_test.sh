#!/bin/sh
# Connections reset mid-reply, against every role of a running job: a
# 1-server, 2-worker sync job with a cluster token and the ring over TCP
# trains while tests/tools/attacker.py (reset) opens connection after
# connection to the scheduler's port, the server's, both workers' (the ring
# port) and the scheduler's HTTP live view, and closes each with RST
# (SO_LINGER 0) right after the node's first write, after a frame the node
# answers, or in the middle of an HTTP reply larger than the window it
# offered. A process that wrote to such a socket without ignoring SIGPIPE was
# killed (exit 141): every process must exit 0, after training under the
# attack.
# Usage: sh tests/reset_test.sh PSTRAIN_BIN [ATTACK_SECONDS]
set -u
BIN="$1"
ATTACK_S="${2:-10}"
WORK=$(mktemp -d)
ID_PREFIX=reset
. "$(dirname "$0")/cluster_util.sh"
TOOLS="$(dirname "$0")/tools"
trap 'cluster_cleanup; rm -rf "$WORK"' EXIT
trap "exit 1" HUP INT TERM
command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }
echo "reset_test: ${ATTACK_S} s of resets, in $WORK"

gen_criteo "$WORK/data" 16000
export MS_SERVER_NUM=1 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1
export MS_CLUSTER_TOKEN="reset-test-token-$$" PSTRAIN_RING_TRANSPORT=tcp
export PSTRAIN_CONNECT_TIMEOUT=60 PSTRAIN_HEARTBEAT_TIMEOUT=10
job_config wide_deep "$WORK/data" "${RESET_EPOCHS:-16}" - > "$WORK/job.yaml"
export PSTRAIN_CONFIG="$WORK/job.yaml"
NODES="server_0 worker_0 worker_1"

HTTP=$(($(pick_port 11) + 1))
PSTRAIN_HTTP_PORT=$HTTP start_scheduler
for n in $NODES; do start "$n"; done
wait_for_count "worker 0 trains" "$(node_log worker_0)" 1 || fail "training never began"
ports=$(sed -n 's/.*node port:\([0-9]*\) assign rank id.*/\1/p' "$(node_log scheduler)" | tr '\n' ',')
ports="$MS_SCHED_PORT,$ports"
echo "resetting connections to ports $ports and HTTP $HTTP"
# What a write to a socket its peer has reset raises: SIGPIPE, whose default
# action ends the process (exit 141). Every process ignores it.
for n in scheduler $NODES; do kill -PIPE "$(node_pid "$n")"; done
sleep 0.5
for n in scheduler $NODES; do
  alive "$n" && continue
  wait_exit "$n" 0
  fail "$n exited $status on a SIGPIPE (141: killed by it)"
done

began=$(now_ms)
python3 "$TOOLS/attacker.py" reset --ports "$ports" --http "$HTTP" --seconds "$ATTACK_S" \
  --out "$WORK/reset.json" > "$WORK/attacker.log" 2>&1 &
attacker=$!
# While the resets go on, every process must live: one killed by SIGPIPE
# exits 141 at once.
while kill -0 "$attacker" 2> /dev/null; do
  for n in scheduler $NODES; do
    alive "$n" && continue
    wait_exit "$n" 0
    [ "$status" = 0 ] && continue  # the job ended before the attack did
    fail "$n exited $status during the resets (141: killed by SIGPIPE)"
  done
  sleep 0.2
done
wait "$attacker" || fail "the attacker failed: $(tail -n 5 "$WORK/attacker.log")"
ended=$(now_ms)
for n in scheduler $NODES; do
  wait_exit "$n" 3000
  [ "$status" = 0 ] || fail "$n exited $status, expected 0 (running: still runs after 300 s)"
done
trained_until=$(log_ms "$(node_log worker_0)" "finished .* steps")
[ "$trained_until" -lt "$ended" ] || trained_until=$ended
overlap=$(((trained_until - began) / 1000))
[ "$overlap" -ge "$((ATTACK_S / 2))" ] ||
  fail "the job trained only $overlap s under the resets (RESET_EPOCHS is too small for this machine)"
echo "the job trained through $overlap s of resets: $(tr -d ' \n' < "$WORK/reset.json")"
echo "reset_test: passed"
