#!/bin/sh
# Elastic jobs (train.elastic, docs/elastic.md): a sync job started as 2
# servers and 2 workers in separate processes changes shape while it
# trains. SCENARIO lenet (LeNet on a slice of Fashion-MNIST; skipped without
# it): a worker joins (live: the workers renumber and rebuild their ring,
# roles/scheduler/live_workers.cc), a server joins (live: its weights are
# all dense), a worker and a server leave on SIGTERM (live), a worker and a
# server join together, a worker above the minimum is killed with SIGKILL,
# a server is replaced at the job's maximum (it gets SIGTERM and a new one
# joins: two live changes), and `pstrain scale` takes the highest server
# rank out live. SCENARIO
# wide_deep (Wide&Deep with its tables on the servers, generated click
# data; the deep table over a memory budget, most of its rows on each
# server's disk): mid-epoch a server joins and another (rank 0) leaves on
# SIGTERM, both live (the joiner takes the leaver's rank): their table rows
# move with their optimizer state
# (roles/server/table_moves.h), and the chief fingerprints every table
# before and after each move (PSTRAIN_TEST_CHECK_MOVES): every row that
# existed before exists after, with the same values and state; then a
# worker joins and the chief (worker 0) is killed with SIGKILL. Checked:
# - every process still running at the end, and every node that left,
#   exits 0; the scheduler logged one "elastic:" line per change;
# - no step is trained twice (every live change goes on from its step, and
#   every node resumes at the step the workers stopped at), the killed
#   worker's too: the others finish the step it was on without it
#   (roles/scheduler/lost_worker.cc);
# - every epoch trained each sample exactly once (the workers'
#   PSTRAIN_TEST_SAMPLE_LOG; the killed worker's last batch counts as used);
# - the test metric (the mean of the last three epochs') is not far below
#   the same job's at a fixed shape: 0.005
#   of AUC (wide_deep); for lenet 1.5 points of accuracy on the 16,384-image
#   slice CI trains, 0.5 points on the whole training set
#   (ELASTIC_SAMPLES=60000). Where the changes fall moves the result: on
#   the slice, the last epoch's accuracy alone came out 0.75 below to 0.93
#   above the fixed shape's 0.8679 in six runs. Only a loss is a failure:
#   a better model is not a defect;
# - lenet: refusals, each one line: a scale beyond the bounds, a scale of a
#   job that is not elastic, a join with another config.
# SCENARIO ssp (the LeNet job in mode ssp, staleness 2): workers join and
# leave live there too (a worker joins, a server joins, the chief, worker
# 0, leaves on SIGTERM with no one joining, a worker joins, hangs while
# the others run ahead and is killed with SIGKILL: it is dropped live and
# the others train the batches it never pushed first (or, when those
# straddle an epoch's end, through the newest checkpoint); a worker joins and
# `pstrain scale --workers 2` sends it away; every weight on the servers);
# checked as lenet, against the same job at a fixed shape in mode ssp.
# SCENARIO edges (the Wide&Deep job in mode async, workers [2, 3] and no
# server bounds): a server cannot join (the server count is fixed), a
# worker joins, a second is refused past the maximum, the one that joined
# is killed with SIGKILL (dropped live, roles/scheduler/lost_worker.cc; or,
# when the batches it never pushed straddle an epoch's end, through the
# newest checkpoint), another joins and
# `pstrain scale --workers 2` sends the highest rank away (exit 0), and a
# SIGTERM at the minimum stops the whole job (every process exits 3).
# Usage: sh tests/elastic_test.sh PSTRAIN_BIN [lenet|wide_deep|ssp|edges]
set -u
BIN="$1"
SCENARIO="${2:-lenet}"
WORK=$(mktemp -d)
ID_PREFIX=elastic
. "$(dirname "$0")/cluster_util.sh"
cleanup() {
  cluster_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
[ -n "${ELASTIC_KEEP:-}" ] && trap - EXIT
echo "elastic_test: $SCENARIO in $WORK"

case "$SCENARIO" in
  lenet | ssp)
    have_fmnist || exit 77
    # The slice CI trains, or ELASTIC_SAMPLES=60000: the whole training set,
    # where the issue's half point holds run after run (3.5 min here).
    SAMPLES=${ELASTIC_SAMPLES:-16384}
    EPOCHS=12 TOLERANCE=0.015
    [ "$SAMPLES" -ge 60000 ] && TOLERANCE=0.005
    MODEL=lenet TEST="[$FMNIST/t10k-images-idx3-ubyte.gz, $FMNIST/t10k-labels-idx1-ubyte.gz]"
    ;;
  wide_deep | edges)
    "$BIN" gen criteo --rows 6000 --test-rows 4000 --out "$WORK/data" > "$WORK/gen.out" 2>&1 ||
      fail "gen criteo"
    # One file, split by sample index: file shards cannot be re-split exactly.
    mv "$WORK/data/train.txt-00000" "$WORK/data/train.txt"
    EPOCHS=12 SAMPLES=6000 TOLERANCE=0.005
    # The edges job ends on a SIGTERM at its minimum: it must outlast its changes.
    [ "$SCENARIO" = edges ] && EPOCHS=100
    MODEL=wide_deep TEST="[$WORK/data/test.txt]"
    ;;
  *) echo "unknown scenario '$SCENARIO'"; exit 2 ;;
esac

# config CHECKPOINT_DIR [TRAIN_LINE...]: the job, with its test set.
config() {
  ckpt=$1
  shift
  job_config "$MODEL" "$WORK/data" "$EPOCHS" "$ckpt" "$@" |
    sed -e "s|^  limit: 4096|  limit: $SAMPLES\n  test: $TEST|" -e "s|^  vocab: 65536|  vocab: 65536\n  test: $TEST|"
}
BOUNDS="elastic: {workers: [2, 4], servers: [1, 3]}"
[ "$SCENARIO" = edges ] && BOUNDS="elastic: {workers: [2, 3]}"
config "$WORK/ckpt" "$BOUNDS" > "$WORK/elastic.yaml"
[ "$SCENARIO" = edges ] && sed -i 's/^  mode: sync/  mode: async/' "$WORK/elastic.yaml"
config "$WORK/ckpt-fixed" > "$WORK/fixed.yaml"
if [ "$SCENARIO" = ssp ]; then
  # Every weight on the servers: no ring holds the others back from
  # running the staleness ahead of a worker that hangs.
  for f in elastic fixed; do
    sed -i -e 's/^  mode: sync/  mode: ssp\n  staleness: 2/' \
      -e 's/{match: "fc\*", ps: false}/{match: "fc*", ps: true}/' "$WORK/$f.yaml"
    grep -q "staleness: 2" "$WORK/$f.yaml" || fail "no mode ssp in $f.yaml"
    grep -q 'ps: false' "$WORK/$f.yaml" && fail "a weight of $f.yaml is all-reduced"
  done
fi
if [ "$SCENARIO" = wide_deep ]; then
  # The deep table keeps most of its rows on each server's disk: moving
  # them reads and writes both tiers.
  mkdir -p "$WORK/store"
  for f in elastic fixed; do
    sed -i -e 's/\("deep_emb.weight", ps: true, init_in_server: true,\)/\1 server_cache_rows: 4000,/' \
      -e "s|^train:|train:\n  store_dir: $WORK/store|" "$WORK/$f.yaml"
    grep -q "server_cache_rows: 4000" "$WORK/$f.yaml" || fail "no memory budget in $f.yaml"
  done
fi
sed 's/seed: \([0-9]\)/seed: 1\1/' "$WORK/elastic.yaml" > "$WORK/other.yaml"

export MS_SERVER_NUM=2 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1
export PSTRAIN_CONNECT_TIMEOUT=60 PSTRAIN_HEARTBEAT_TIMEOUT=10

# join NAME: a node started while the job runs, with no rank of its own.
join() {
  case "$1" in server*) role=MS_PSERVER ;; *) role=MS_WORKER ;; esac
  (
    export MS_ROLE=$role MS_NODE_ID="$ID_PREFIX-$1" PSTRAIN_TEST_SAMPLE_LOG="$WORK/samples-$1.txt"
    exec "$BIN" >> "$(node_log "$1")" 2>&1
  ) &
  echo $! > "$WORK/$1.pid"
}
# change N: waits for the scheduler's N-th "elastic:" line and the job's
# resumption after it, then a second of training.
change() {
  wait_for_count "elastic:" "$SCHED" "$1" 600 || fail "change $1 did not happen"
  # A change through a checkpoint resumes every node; a server joining a
  # job of dense partitions only joins live (roles/worker/grow.h).
  wait_for_count "every node is back\|live change done" "$SCHED" "$1" 600 ||
    fail "the job did not resume after change $1"
  echo "  $(grep "elastic:" "$SCHED" | sed -n "$1p" | cut -c 1-240)"
  sleep 1
}
# metric LOG: the mean of the last three epochs' test accuracy or AUC in
# LOG. The last epoch's alone moves by up to a point from one epoch to the
# next, even at a fixed shape.
metric() {
  grep "test accuracy\|test AUC" "$1" | tail -n 3 | sed 's/.*test [a-zA-Z]*: \([0-9.]*\).*/\1/' |
    awk '{ sum += $1; n++ } END { if (n) printf "%.4f\n", sum / n }'
}

if [ "$SCENARIO" = edges ]; then
  echo "elastic_test: the edges of an elastic job"
  RUN=edges PSTRAIN_CONFIG="$WORK/elastic.yaml"
  export PSTRAIN_CONFIG
  SCHED=$(node_log scheduler)
  HTTP=$(pick_port 7)
  PSTRAIN_HTTP_PORT=$HTTP start_scheduler
  for n in server_0 server_1 worker_0 worker_1; do start "$n"; done
  wait_for_count "epoch: 1 step: 1," "$(node_log worker_0)" 1 600 || fail "the job did not start"
  join server_j1
  wait_exit server_j1 600
  [ "$status" = 1 ] && grep -q "server count is fixed\|sets no servers" "$(node_log server_j1)" ||
    fail "a server joined a job without server bounds (exit $status)"
  echo "  server join refused: $(grep -m 1 "sets no servers" "$(node_log server_j1)" | sed 's/.*refused this node: //' | cut -c 1-150)"
  join worker_j1
  change 1
  # The live view shows the bounds and the change.
  if command -v curl > /dev/null && command -v python3 > /dev/null; then
    curl -s -m 5 "http://127.0.0.1:$HTTP/status" > "$WORK/status.json" || fail "GET /status"
    python3 - "$WORK/status.json" << 'PY' || fail "/status lacks the elastic section: $(cat "$WORK/status.json")"
import json, sys
job = json.load(open(sys.argv[1]))["job"]
e = job["elastic"]
assert job["workers"] == 3 and job["servers"] == 2, job
assert e["bounds"] == "workers [2, 3]", e
assert len(e["changes"]) == 1 and "workers 2 -> 3" in e["changes"][0], e
print("  /status: job.elastic", json.dumps(e)[:160])
PY
  fi
  join worker_j2
  wait_exit worker_j2 600
  [ "$status" = 1 ] && grep -q "allows at most 3" "$(node_log worker_j2)" ||
    fail "a fourth worker joined a job of at most 3 (exit $status)"
  echo "  join past the maximum refused: $(grep -m 1 "allows at most" "$(node_log worker_j2)" | sed 's/.*refused this node: //' | cut -c 1-150)"
  kill -9 "$(node_pid worker_j1)"
  change 2
  if grep -q "lie in an epoch the others have finished" "$SCHED"; then
    # Its batches not pushed straddle an epoch's end: back to the checkpoint.
    grep "elastic:" "$SCHED" | sed -n 2p |
      grep -q "workers 3 -> 2 from the newest checkpoint: worker node id:$ID_PREFIX-worker_j1 was lost" ||
      fail "the killed worker of an async job was not dropped"
  else
    grep "elastic:" "$SCHED" | sed -n 2p |
      grep -q "worker node id:$ID_PREFIX-worker_j1 leaves (lost: .*nothing redone).*(live" ||
      fail "the killed worker of an async job was not dropped live"
  fi
  join worker_j3
  change 3
  "$BIN" scale --workers 2 > "$WORK/scale.out" 2> "$WORK/scale.err" || fail "scale to 2: $(cat "$WORK/scale.err")"
  echo "  pstrain scale --workers 2: $(cat "$WORK/scale.out")"
  change 4
  grep "elastic:" "$SCHED" | sed -n 4p | grep -q "worker node id:$ID_PREFIX-worker_j3 leaves (pstrain scale)" ||
    fail "scale did not send the highest rank away"
  wait_exit worker_j3 600
  [ "$status" = 0 ] || fail "the worker scaled away exited $status"
  kill -TERM "$(node_pid worker_1)"
  for n in scheduler server_0 server_1 worker_0 worker_1; do
    wait_exit "$n" 3000
    [ "$status" = 3 ] || fail "SIGTERM at the minimum: $n exited $status, expected 3 (the job stops)"
  done
  grep -q "cannot leave: the job would have fewer than its minimum of 2 workers" "$SCHED" ||
    fail "the scheduler does not say why the job stopped"
  echo "  SIGTERM at the minimum: $(grep -m 1 "cannot leave" "$SCHED" | sed 's/.*\] //' | cut -c 1-200)"
  echo "elastic_test: passed"
  exit 0
fi

# 1. The same job at a fixed shape; its scheduler refuses a scale.
echo "elastic_test: the fixed-shape job"
RUN=fixed PSTRAIN_CONFIG="$WORK/fixed.yaml"
export PSTRAIN_CONFIG
start_scheduler
for n in server_0 server_1 worker_0 worker_1; do start "$n"; done
wait_for_count "epoch: 1 step: 1," "$(node_log worker_0)" 1 600 || fail "the fixed job did not start"
if [ "$SCENARIO" = lenet ]; then
  "$BIN" scale --workers 3 > "$WORK/scale.out" 2> "$WORK/scale.err"
  rc=$?
  [ "$rc" = 1 ] && grep -q "is not elastic" "$WORK/scale.err" && [ "$(wc -l < "$WORK/scale.err")" = 1 ] ||
    fail "scale of a fixed job: exit $rc, $(cat "$WORK/scale.err")"
  echo "  scale of a fixed job: $(cat "$WORK/scale.err")"
fi
for n in scheduler server_0 server_1 worker_0 worker_1; do
  wait_exit "$n" 3000
  [ "$status" = 0 ] || fail "fixed job: $n exited $status"
done
FIXED=$(metric "$(node_log worker_0)")
echo "  fixed shape: test metric $FIXED"

# 2. The elastic job.
echo "elastic_test: the elastic job"
RUN=elastic PSTRAIN_CONFIG="$WORK/elastic.yaml"
# The chief fingerprints the tables around each live move of rows.
export PSTRAIN_TEST_CHECK_MOVES=1
SCHED=$(node_log scheduler)
start_scheduler
for n in server_0 server_1 worker_0 worker_1; do
  export PSTRAIN_TEST_SAMPLE_LOG="$WORK/samples-$n.txt"
  start "$n"
done
unset PSTRAIN_TEST_SAMPLE_LOG
wait_for_count "epoch: 1 step: 1," "$(node_log worker_0)" 1 600 || fail "the elastic job did not start"
sleep 1
if [ "$SCENARIO" = wide_deep ]; then
  # A server joins (rank 2), then server 0 leaves: the joiner takes rank 0.
  join server_j1
  change 1
  kill -TERM "$(node_pid server_0)"
  change 2
  for s in 1 2; do
    grep "elastic:" "$SCHED" | sed -n "${s}p" | grep -q "(live" || fail "change $s was not live"
  done
  checks=$(count "table rows check at step" "$(node_log worker_0)")
  [ "$checks" = 2 ] || fail "$checks table checks, 2 expected (one per move)"
  grep "table rows check at step" "$(node_log worker_0)" | sed 's/.*\] /  /' | cut -c 1-200
  grep "elastic:" "$SCHED" | sed -n 2p | grep -q "server_j1 takes rank 0" ||
    fail "the joiner did not take the leaver's rank"
  # A worker joins, then the chief is killed: the others finish its step
  # without it (the rows it pushed count where they came), the lowest rank
  # left writes the checkpoint, and nothing is redone.
  join worker_j1
  change 3
  kill -9 "$(node_pid worker_0)"
  change 4
  grep "elastic:" "$SCHED" | sed -n 4p |
    grep -q "worker_0 leaves (lost: step [0-9]* finished without it, nothing redone)" ||
    fail "the killed chief's step was not finished without it"
  ENDS="scheduler server_1 server_j1 worker_1 worker_j1" LEFT="server_0" STAYER=worker_1
elif [ "$SCENARIO" = ssp ]; then
  join worker_j1
  change 1
  join server_j1
  change 2
  kill -TERM "$(node_pid worker_0)"
  change 3
  grep "elastic:" "$SCHED" | sed -n 3p | grep -q "worker_1 takes rank 0" ||
    fail "worker 1 did not take the chief's rank"
  # A worker hangs (a test fault holds its push frame 200 for a minute)
  # while the others run ahead of it by the staleness, and is killed: they
  # go on without it live, training first the batches it never pushed.
  PSTRAIN_TEST_FAULT=delay:200:60000
  export PSTRAIN_TEST_FAULT
  join worker_j2
  unset PSTRAIN_TEST_FAULT
  change 4
  wait_for_count "test fault: holding push frame" "$(node_log worker_j2)" 1 600 ||
    fail "worker_j2 did not hang"
  sleep 1
  kill -9 "$(node_pid worker_j2)"
  change 5
  join worker_j3
  change 6
  "$BIN" scale --workers 2 > "$WORK/scale.out" 2> "$WORK/scale.err" ||
    fail "scale to 2 workers: $(cat "$WORK/scale.err")"
  change 7
  for s in 1 3 4 6 7; do
    grep "elastic:" "$SCHED" | sed -n "${s}p" | grep -q "no node starts again" ||
      fail "change $s of the ssp job was not live"
  done
  if grep -q "lie in an epoch the others have finished" "$SCHED"; then
    # Its batches not pushed straddle an epoch's end (the others ran ahead
    # into the next one): back to the checkpoint, as in the edges scenario.
    grep "elastic:" "$SCHED" | sed -n 5p |
      grep -q "workers 3 -> 2 from the newest checkpoint: worker node id:$ID_PREFIX-worker_j2 was lost" ||
      fail "the hung worker was not dropped"
  else
    grep "elastic:" "$SCHED" | sed -n 5p | grep -q "no node starts again" ||
      fail "change 5 of the ssp job was not live"
    grep "elastic:" "$SCHED" | sed -n 5p |
      grep -q "worker_j2 leaves (lost: its batches of steps [0-9]* to [0-9]* trained first by the others" ||
      fail "the hung worker's batches were not made up live"
  fi
  grep "elastic:" "$SCHED" | sed -n 7p | grep -q "worker_j3 leaves (pstrain scale)" ||
    fail "scale did not send the highest rank away"
  ENDS="scheduler server_0 server_1 server_j1 worker_1 worker_j1" LEFT="worker_0 worker_j3"
  STAYER=worker_1
else
  join worker_j1
  change 1
  join server_j1
  change 2
  kill -TERM "$(node_pid worker_1)"
  change 3
  kill -TERM "$(node_pid server_0)"
  change 4
  "$BIN" scale --workers 5 > "$WORK/scale.out" 2> "$WORK/scale.err"
  rc=$?
  [ "$rc" = 1 ] && grep -q "outside train.elastic" "$WORK/scale.err" ||
    fail "scale beyond the bounds: exit $rc, $(cat "$WORK/scale.err")"
  echo "  scale beyond the bounds: $(cat "$WORK/scale.err")"
  export PSTRAIN_CONFIG="$WORK/other.yaml"
  join worker_other
  export PSTRAIN_CONFIG="$WORK/elastic.yaml"
  wait_exit worker_other 600
  [ "$status" != 0 ] && [ "$status" != running ] || fail "a worker with another config exited $status"
  grep -q "config differs" "$(node_log worker_other)" || fail "the other config's refusal names no difference"
  echo "  join with another config: $(grep -m 1 "config differs" "$(node_log worker_other)" | cut -c 1-200)"
  join worker_j2
  join server_j2
  change 5
  # The two may join in one change or in two.
  grep "elastic:" "$SCHED" | sed -n 5p | grep -q "workers 2 -> 3, servers 2 -> 3" || change 6
  # Counted before the kill: the scheduler may log the loss before the
  # shell counts again.
  next=$(($(count "elastic:" "$SCHED") + 1))
  kill -9 "$(node_pid worker_j2)"
  change "$next"
  # The others finished the killed worker's step without it.
  grep "elastic:" "$SCHED" | tail -n 1 | grep -q "worker_j2 leaves (lost: step [0-9]* finished without it, nothing redone)" ||
    fail "the killed worker's step was not finished without it"
  grep -q "the others go on without it from step" "$SCHED" || fail "the scheduler does not say where the workers go on"
  # A server replaced at the job's maximum of 3: server 1 gets SIGTERM, and
  # once the scheduler has begun its leave a new one joins: two live
  # changes (server_j2 takes rank 1, the joiner rank 2).
  next=$(($(count "elastic:" "$SCHED") + 1))
  copies=$(count "copied ahead of the change" "$SCHED")
  kill -TERM "$(node_pid server_1)"
  wait_for_count "copied ahead of the change" "$SCHED" $((copies + 1)) ||
    fail "the scheduler did not begin server 1's leave"
  join server_j3
  change "$next"
  change $((next + 1))
  for s in "$next" $((next + 1)); do
    grep "elastic:" "$SCHED" | sed -n "${s}p" | grep -q "(live" || fail "change $s was not live"
  done
  # The highest server rank leaves live (its partitions move to the others).
  next=$(($(count "elastic:" "$SCHED") + 1))
  "$BIN" scale --servers 2 > "$WORK/scale.out" 2> "$WORK/scale.err" ||
    fail "scale to 2 servers: $(cat "$WORK/scale.err")"
  change "$next"
  grep "elastic:" "$SCHED" | tail -n 1 | grep -q "servers 3 -> 2 .*(live" ||
    fail "the scale to 2 servers was not live"
  ENDS="scheduler server_j1 server_j2 worker_0 worker_j1"
  LEFT="worker_1 server_0 server_1 server_j3" STAYER=worker_0
fi

for n in $ENDS; do
  wait_exit "$n" 3000
  [ "$status" = 0 ] || fail "elastic job: $n exited $status"
done
for n in $LEFT; do
  wait_exit "$n" 10
  [ "$status" = 0 ] || fail "$n, which left, exited $status"
  grep -q "this node left the job" "$(node_log "$n")" || fail "$n does not say it left"
done

# No step redone for a join or a leave: every resume is at its change's
# step, and a live change goes on from its step.
grep "elastic: workers" "$SCHED" | grep "from step" | grep -v "(live" |
  sed 's/.*from step \([0-9]*\):.*/\1/' > "$WORK/stops"
for s in $(cat "$WORK/stops"); do
  grep -q "resuming at step $s from" "$(node_log "$STAYER")" ||
    fail "$STAYER did not resume at step $s, where the workers stopped for a change"
done
grep "elastic: workers" "$SCHED" | grep "(live" | sed 's/.*from step \([0-9]*\):.*/\1/' > "$WORK/live"
for s in $(cat "$WORK/live"); do
  grep -q "live change done: .* from step $s," "$SCHED" ||
    fail "the live change at step $s was not done"
  if grep "elastic: workers" "$SCHED" | grep "from step $s:" | grep -q "no node starts again"; then
    grep -q "goes on as rank .* from step $s " "$(node_log "$STAYER")" ||
      fail "$STAYER did not go on live at step $s"
  else
    grep -q "the job runs with .* servers from step $s: .* moved live" "$(node_log worker_0)" ||
      fail "worker_0 did not move partitions live at step $s"
  fi
done
[ "$SCENARIO" != lenet ] || grep -q "servers 2 -> 3 .*(live" "$SCHED" || fail "no server joined live"
[ "$SCENARIO" != lenet ] || grep -q "workers 2 -> 3, .*no node starts again" "$SCHED" ||
  fail "no worker joined live"
# Samples: the last generation's run of each step, then each epoch's count
# of each sample. A killed worker's last step is logged by the chief on its
# behalf (the job counts it as used): the same line when the worker had
# logged it too.
cat "$WORK"/samples-*.txt | sort -u | awk -v n="$SAMPLES" -v epochs="$EPOCHS" '
  { line[NR] = $0; g[NR] = $1; s[NR] = $2; if ($1 > last[$2]) last[$2] = $1 }
  END {
    for (i = 1; i <= NR; i++) {
      if (g[i] != last[s[i]]) { redone[s[i]] = 1; continue }
      split(line[i], f, " ")
      used[f[3] " " f[4]]++
    }
    for (k in redone) r++
    bad = 0
    for (e = 0; e < epochs; e++)
      for (x = 0; x < n; x++)
        if (used[e " " x] != 1) { if (bad < 5) printf "epoch %d sample %d used %d times\n", e + 1, x, used[e " " x]; bad++ }
    printf "redone %d\n", r
    exit bad > 0
  }' > "$WORK/samples.out" || fail "samples not used exactly once: $(head -n 5 "$WORK/samples.out")"
REDONE=$(sed -n 's/^redone //p' "$WORK/samples.out")
echo "  every epoch used each of the $SAMPLES samples exactly once; steps redone: $REDONE"
[ "$REDONE" = 0 ] || fail "$REDONE steps redone"
ELASTIC=$(metric "$(node_log "$STAYER")")
echo "  elastic: test metric $ELASTIC (fixed shape $FIXED)"
awk -v a="$ELASTIC" -v b="$FIXED" -v t="$TOLERANCE" 'BEGIN { exit !(b - a <= t) }' ||
  fail "test metric $ELASTIC is more than $TOLERANCE below the fixed shape's $FIXED"
echo "elastic_test: passed"
