#!/bin/sh
# Recovery figures: a 2-server, 2-worker sync Wide&Deep job on
# generated click data, separate processes on 127.0.0.1, a checkpoint every
# 16 steps, recovery on. Per round and heartbeat setting (interval/timeout:
# 0.2/2 s and the defaults 1/30 s):
#   kill9:   kill -9 of worker 1 at a random moment; notice_ms is the
#            scheduler's "lost the" line minus the kill; a replacement starts
#            at once: resume_ms is the scheduler's "the job resumes" line minus
#            its start, first_step_ms worker 0's first progress line after
#            that; steps_redone is worker 0's step at the kill minus the step
#            it resumed from ("resuming at step N").
#   sigstop: SIGSTOP of worker 1 (the replacement); notice_ms as above.
# One JSON object per line on stdout, e.g.
#   {"bench":"recovery","heartbeat":"0.2/2","event":"kill9","notice_ms":3,...}
# Usage: sh tests/bench/recovery_bench.sh PSTRAIN_BIN [ROUNDS]
set -u
BIN="$1"
ROUNDS="${2:-3}"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
. "$REPO/tests/cluster_util.sh"
trap 'cluster_cleanup; rm -rf "$WORK"' EXIT
trap "exit 1" HUP INT TERM PIPE

export MS_SERVER_NUM=2 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1 ID_PREFIX=bench
export PSTRAIN_CONNECT_TIMEOUT=60
NODES="server_0 server_1 worker_0 worker_1"
gen_criteo "$WORK/data" 8000
# Every step logged: the step at the kill is read from worker 0's log.
job_config wide_deep "$WORK/data" 1000 "$WORK/ckpt" "recovery: {wait_s: 120}" |
  sed 's/log_every: 1000/log_every: 1/' > "$WORK/job.yaml"
export PSTRAIN_CONFIG="$WORK/job.yaml"

# step_in LINES: worker 0's completed steps in the first LINES of its log.
step_in() {
  head -n "$1" "$(node_log worker_0)" | awk '
    / trains [0-9]+ steps \(/ { for (i = 1; i < NF; i++) if ($i == "steps") { sub(/\(/, "", $(i + 1)); per = $(i + 1) } }
    /epoch: [0-9]+ step: [0-9]+,/ { for (i = 1; i < NF; i++) if ($i == "epoch:") { e = $(i + 1); s = $(i + 3) + 0 } }
    END { print (e - 1) * per + s }'
}

# round HEARTBEAT SALT: one job, one kill -9 and one SIGSTOP.
round() {
  hb=$1
  export PSTRAIN_HEARTBEAT_INTERVAL=${hb%/*} PSTRAIN_HEARTBEAT_TIMEOUT=${hb#*/}
  rm -rf "$WORK/ckpt" "$WORK"/*.log "$WORK"/*.pid
  export MS_SCHED_PORT=$(pick_port "$2")
  start scheduler
  wait_for_count "listens on" "$(node_log scheduler)" 1 100 || fail "the scheduler never listened"
  for n in $NODES; do start "$n"; done
  wait_for_count "checkpoint of step" "$(node_log worker_0)" 2 || fail "no checkpoints written"
  sleep "$(awk -v s="$2" 'BEGIN { srand(s); printf "%.2f", rand() }')"

  lines=$(wc -l < "$(node_log worker_0)")
  kill -9 "$(node_pid worker_1)"
  killed=$(now_ms)
  at_kill=$(step_in "$lines")
  wait "$(node_pid worker_1)" 2> /dev/null
  wait_for_count "lost the" "$(node_log scheduler)" 1 || fail "the kill went unnoticed"
  notice=$(($(log_ms "$(node_log scheduler)" "lost the") - killed))
  start worker_1
  started=$(now_ms)
  wait_for_count "the job resumes" "$(node_log scheduler)" 1 || fail "the job did not resume"
  resumed=$(($(log_ms "$(node_log scheduler)" "the job resumes") - started))
  log0=$(node_log worker_0)
  wait_for_count "resuming at step" "$log0" 1 || fail "worker 0 did not resume"
  from=$(sed -n 's/.*resuming at step \([0-9]*\) .*/\1/p' "$log0" | head -n 1)
  t=0
  until sed -n '/resuming at step/,$p' "$log0" | grep -q "epoch: [0-9]* step:" || [ "$t" -ge 600 ]; do
    sleep 0.1
    t=$((t + 1))
  done
  first=$(sed -n '/resuming at step/,$p' "$log0" | grep -m 1 "epoch: [0-9]* step:" |
    sed -n 's/^\[\([0-9-]* [0-9:.]*\)\].*/\1/p')
  first_ms=$(($(date -d "$first" +%s%3N) - started))
  echo "{\"bench\":\"recovery\",\"heartbeat\":\"$hb\",\"event\":\"kill9\",\"victim\":\"worker_1\"," \
    "\"notice_ms\":$notice,\"resume_ms\":$resumed,\"first_step_ms\":$first_ms," \
    "\"step_at_kill\":$at_kill,\"resumed_from\":$from,\"steps_redone\":$((at_kill - from))}" | tr -d ' '

  wait_for_count "checkpoint of step $((from + 32))" "$log0" 1 || fail "no checkpoint after the resume"
  kill -STOP "$(node_pid worker_1)"
  stopped=$(now_ms)
  wait_for_count "lost the" "$(node_log scheduler)" 2 $(((${hb#*/} + 30) * 10)) ||
    fail "the SIGSTOP went unnoticed"
  notice=$(($(sed -n '/lost the/{s/^\[\([0-9-]* [0-9:.]*\)\].*/\1/p}' "$(node_log scheduler)" |
    sed -n 2p | xargs -I{} date -d {} +%s%3N) - stopped))
  echo "{\"bench\":\"recovery\",\"heartbeat\":\"$hb\",\"event\":\"sigstop\",\"victim\":\"worker_1\"," \
    "\"notice_ms\":$notice}" | tr -d ' '
  cluster_cleanup
  for n in scheduler $NODES; do wait "$(node_pid "$n")" 2> /dev/null; done
}

r=0
while [ "$r" -lt "$ROUNDS" ]; do
  r=$((r + 1))
  round 0.2/2 "$r"
  round 1/30 "$((r + 50))"
done
