#!/bin/sh
# Live attack: a 2-server, 2-worker sync job with a cluster token
# (Wide&Deep on generated click data: dense and embedding traffic) trains
# while tests/tools/attacker.py hits the scheduler's and every node's port:
# floods of connections with random bytes, fixed headers announcing huge
# headers and payloads, truncated frames left open, slowloris peers, frames
# recorded from real connections and replayed, and a real node started with
# the wrong token. Checked: every process exits 0; the final checkpoint is
# byte for byte that of the same job run unattacked; each node's peak RSS
# stays within ATTACK_RSS_MARGIN_MB (default 96) of its peak in the
# unattacked run; slowloris peers are dropped by the handshake deadline;
# the wrong-token node is refused with a logged reason.
# Usage: sh tests/attack_test.sh PSTRAIN_BIN [ATTACK_SECONDS]
set -u
BIN="$1"
ATTACK_S="${2:-20}"
MARGIN_MB="${ATTACK_RSS_MARGIN_MB:-96}"
WORK=$(mktemp -d)
ID_PREFIX=attack
. "$(dirname "$0")/cluster_util.sh"
TOOLS="$(dirname "$0")/tools"
cleanup() {
  cluster_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
[ -n "${ATTACK_KEEP:-}" ] && trap - EXIT
echo "attack_test: ${ATTACK_S} s of attack, in $WORK"

command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }
gen_criteo "$WORK/data" 16000

export MS_SERVER_NUM=2 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1
export MS_CLUSTER_TOKEN="attack-test-token-$$"
export PSTRAIN_CONNECT_TIMEOUT=60 PSTRAIN_HEARTBEAT_TIMEOUT=10
NODES="server_0 server_1 worker_0 worker_1"
EPOCHS=${ATTACK_EPOCHS:-8}

# peak_rss NAME...: samples VmRSS (KiB) of each node while the job runs,
# into WORK/RUN-NAME.rss (the largest seen).
sample_rss() {
  for n in scheduler $NODES; do echo 0 > "$WORK/$RUN-$n.rss"; done
  while alive worker_0 || alive worker_1; do
    for n in scheduler $NODES; do
      kib=$(awk '/^VmRSS:/ { print $2 }' "/proc/$(node_pid "$n")/status" 2> /dev/null)
      [ -n "$kib" ] && [ "$kib" -gt "$(cat "$WORK/$RUN-$n.rss")" ] && echo "$kib" > "$WORK/$RUN-$n.rss"
    done
    sleep 0.2
  done
}

wait_all() {
  for n in scheduler $NODES; do
    wait_exit "$n" 3000
    [ "$status" = 0 ] || fail "$RUN: $n exited $status, expected 0 (running: still runs after 300 s)"
  done
}

start_job() {  # RUN: clean or attacked
  RUN=$1
  job_config wide_deep "$WORK/data" "$EPOCHS" "$WORK/ckpt-$RUN" > "$WORK/$RUN.yaml"
  export PSTRAIN_CONFIG="$WORK/$RUN.yaml"
  start_scheduler
  for n in $NODES; do start "$n"; done
}

RUN=clean
start_job clean
sample_rss &
sampler=$!
wait_all
wait "$sampler"
echo "clean run: done"

# The attacked run. Worker 1 reaches the scheduler through a recording proxy,
# so that real frames of this job (its handshake, registration, barriers,
# heartbeats) can be replayed by strangers.
RUN=attacked
job_config wide_deep "$WORK/data" "$EPOCHS" "$WORK/ckpt-attacked" > "$WORK/attacked.yaml"
export PSTRAIN_CONFIG="$WORK/attacked.yaml"
start_scheduler
sched_port=$MS_SCHED_PORT
# proxy NAME: a recording proxy to the scheduler; its port in WORK/NAME.port,
# what each client sent in WORK/NAME.bin.N.
proxy() {
  python3 "$TOOLS/record_proxy.py" "$sched_port" "$WORK/$1.port" "$WORK/$1.capture" 600 \
    "$WORK/$1.bin" > "$WORK/$1.log" 2>&1 &
  echo $! > "$WORK/$1.pid"
  t=0
  while [ ! -f "$WORK/$1.port" ] && [ "$t" -lt 100 ]; do sleep 0.1; t=$((t + 1)); done
  [ -f "$WORK/$1.port" ] || fail "the $1 proxy did not start"
}
proxy recorded
proxy_port=$(cat "$WORK/recorded.port")
for n in server_0 server_1 worker_0; do start "$n"; done
MS_SCHED_PORT=$proxy_port start worker_1
wait_for_count "worker 0 trains" "$(node_log worker_0)" 1 || fail "attacked: training never began"
sample_rss &
sampler=$!

# The node ports, from the scheduler's rank lines.
ports=$(sed -n 's/.*node port:\([0-9]*\) assign rank id.*/\1/p' "$(node_log scheduler)" | sort -u | tr '\n' ',')
ports="${sched_port},${ports}"
pids=""
for n in scheduler $NODES; do pids="$pids$(node_pid "$n"),"; done

# A real node with the wrong token, recorded too: its frames are replayed
# at the node ports.
proxy wrong
wrong_port=$(cat "$WORK/wrong.port")
(MS_CLUSTER_TOKEN=not-the-token MS_ROLE=MS_WORKER MS_NODE_ID=intruder MS_SCHED_PORT=$wrong_port \
  PSTRAIN_CONNECT_TIMEOUT=5 timeout 30 "$BIN" > "$WORK/intruder.log" 2>&1)
intruder=$?
kill "$(cat "$WORK/wrong.pid")" 2> /dev/null
[ "$intruder" != 0 ] || fail "a worker with the wrong token was let in"

attack_began=$(now_ms)
python3 "$TOOLS/attacker.py" attack --ports "$ports" --replay "$WORK/recorded.bin,$WORK/wrong.bin" \
  --seconds "$ATTACK_S" --pids "$pids" --out "$WORK/attack.json" > "$WORK/attacker.log" 2>&1 &
attacker=$!
wait_all
wait "$sampler"
wait "$attacker" || fail "the attacker failed: $(tail -n 5 "$WORK/attacker.log")"
# The attack must have hit a training job, not its leftovers.
trained_until=$(log_ms "$(node_log worker_0)" "finished .* steps")
overlap=$(((trained_until - attack_began) / 1000))
echo "the job trained for $overlap s under attack"
[ "$overlap" -ge "$((ATTACK_S / 2))" ] ||
  fail "the job trained only $overlap s under attack (ATTACK_EPOCHS is too small for this machine)"
kill "$(cat "$WORK/recorded.pid")" 2> /dev/null
echo "attacked run: done"
cat "$WORK/attack.json"

grep -q "authentication failed" "$(node_log scheduler)" ||
  fail "the scheduler did not log the wrong token's refusal"

# Same weights: the final checkpoint of both runs, file by file.
last=$(ls -d "$WORK/ckpt-clean"/step-* | tail -n 1)
step=$(basename "$last")
files=$(ls "$last")
for f in $files; do
  case "$f" in
    server-*.ckpt) python3 "$TOOLS/ckpt_same.py" "$last/$f" "$WORK/ckpt-attacked/$step/$f" ;;
    MANIFEST) true ;;
    *) cmp -s "$last/$f" "$WORK/ckpt-attacked/$step/$f" ;;
  esac || fail "$step/$f differs between the clean run and the attacked one"
done

# Memory: each node's peak within the margin of its unattacked peak.
for n in scheduler $NODES; do
  clean=$(cat "$WORK/clean-$n.rss")
  attacked=$(cat "$WORK/attacked-$n.rss")
  echo "peak RSS $n: clean $((clean / 1024)) MiB, attacked $((attacked / 1024)) MiB"
  [ "$attacked" -le $((clean + MARGIN_MB * 1024)) ] ||
    fail "$n peaked at $((attacked / 1024)) MiB under attack, over its clean $((clean / 1024)) MiB + ${MARGIN_MB} MiB"
done

# Slowloris: every one dropped (a lifetime of -1 means it was never dropped).
python3 - "$WORK/attack.json" << 'EOF' || fail "slowloris peers were not dropped"
import json, sys
r = json.load(open(sys.argv[1]))
lives = r["slowloris_lifetimes_s"]
assert lives and min(lives) >= 0, lives
print(f"slowloris peers dropped after {min(lives)} to {max(lives)} s")
EOF
echo "attack_test: passed ($(echo $files | wc -w) files of $step identical)"
