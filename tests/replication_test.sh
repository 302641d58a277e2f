# Replicated servers (train.replication, roles/server/replication.h): a
# sync LeNet job of 3 servers and 2 workers with replicas: 1 and no
# checkpoints, whose servers are killed with SIGKILL at random while it
# trains, each started again as a new node (a process with a node id never
# seen) once its backup took over, ends with exit 0
# and the same weights, bit for bit, as the same job never killed: each
# lost server's partitions are taken over by its backup
# (roles/scheduler/promotion.cc), the restarted one joins as a backup, no
# step is redone and nothing rolls back.
#
# With "stop", each server is stopped (SIGSTOP) instead of killed: its
# backup takes over after the heartbeat timeout, and once the server is
# woken (SIGCONT) it learns it was counted lost, drops what it held and
# joins again as a backup: it never serves the workers again. With PROBE
# (tests/stale_pull_probe.cc), a pull sent to it while it sleeps is never
# answered.
#
# With EVERY=N in the environment the job checkpoints every N steps, and
# the checkpoints are compared file by file: each rank's file is written by
# the server holding that rank's partitions then.
#
# With MODEL=wide_deep the job is an async Wide&Deep (MODE=sync: sync, and
# its tables' rows must then be the same bit for bit) on generated click
# data, its embedding tables on the servers: async runs differ from run to
# run, so the killed job must end with every table row the calm one has and
# every update applied exactly once (the rows' count and the sum of their
# update counts over the primaries, which do not depend on the order the
# pushes came in), each backup's copy of every table share the same as its
# primary's (their digests), and a test AUC within 0.002 of the calm job's
# (the mean of the last three epochs').
#
# With TIERED=1 (and MODEL=wide_deep), most of the deep table's rows are
# on the servers' disks (server_cache_rows), and so are their backups'.
#
# VICTIMS="2 1 0 ..." picks the servers lost, in turn, instead of at random.
#
# With "double", two servers are killed at once instead: the job ends with
# an error naming the server ranks whose partitions had no whole copy.
#
# With "cut", no server is lost: server 1 closes its link to its backup
# (PSTRAIN_TEST_FAULT=close:40, its 40th change), links again and sends
# every state again, and the job ends with the same weights, bit for bit.
#
# Usage: replication_test.sh PSTRAIN_BINARY [KILLS] [kill|stop|double|cut]
# The weights are compared by the servers' fingerprints at the end
# ("replication: server N's own ... digest"), whose sum over the servers
# fingerprints the whole model wherever its partitions are.
set -u
BIN="$1"
KILLS="${2:-2}"
HOW="${3:-kill}"
WORK=$(mktemp -d)
. "$(dirname "$0")/cluster_util.sh"
cleanup() {
  cluster_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
[ -n "${REPLICATION_KEEP:-}" ] && trap - EXIT
MODEL="${MODEL:-lenet}"
[ "$MODEL" = lenet ] && { have_fmnist || exit 77; }
command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }
if [ "$MODEL" = wide_deep ]; then
  "$BIN" gen criteo --rows 20000 --test-rows 4000 --out "$WORK/data" > "$WORK/gen.out" 2>&1 ||
    fail "gen criteo"
fi

# wide_deep_config NAME REPLICAS: an async Wide&Deep job (tests/cluster_util.sh),
# tables on the servers.
wide_deep_config() {
  job_config wide_deep "$WORK/data" "${EPOCHS:-40}" - "partition_bytes: 16384" \
    "replication: {replicas: $2}" |
    sed -e "s|^  vocab: 65536|  vocab: 65536\n  test: [$WORK/data/test.txt]|" \
      -e "s|train.txt\]|train.txt-00000]|" -e "s/adagrad, lr: 1.0/adagrad, lr: 0.5/" \
      -e "s/adam, lr: 0.001/adam, lr: 0.0005/" \
      -e "s/^  batch_size: 16/  batch_size: 128/" -e "s/^  mode: sync/  mode: ${MODE:-async}/" \
      -e "s/^  log_every: 1000/  log_every: 20/" > "$WORK/$1.yaml"
  # TIERED=1: each server keeps at most 10000 rows of the deep table in
  # memory (about half of its share), the rest on its disk (copies too, in
  # stores of their own).
  if [ -n "${TIERED:-}" ]; then
    mkdir -p "$WORK/$1-store"
    sed -i -e 's/\("deep_emb.weight", ps: true, init_in_server: true,\)/\1 server_cache_rows: 10000,/' \
      -e "s|^train:|train:\n  store_dir: $WORK/$1-store|" "$WORK/$1.yaml"
    grep -q "server_cache_rows: 10000" "$WORK/$1.yaml" || fail "no memory budget in $1.yaml"
  fi
}

# config NAME REPLICAS: a sync LeNet job on a slice of Fashion-MNIST.
config() {
  [ "$MODEL" = wide_deep ] && { wide_deep_config "$@"; return 0; }
  cat > "$WORK/$1.yaml" << YAML
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
    - {name: fc2, type: linear, out: 84}
    - relu
    - {name: fc3, type: linear, out: 10}
data:
  format: idx
  train: [$FMNIST/train-images-idx3-ubyte.gz, $FMNIST/train-labels-idx1-ubyte.gz]
  test: [$FMNIST/t10k-images-idx3-ubyte.gz, $FMNIST/t10k-labels-idx1-ubyte.gz]
  limit: 4096
train:
  epochs: ${EPOCHS:-12}
  batch_size: 32
  mode: sync
  optimizer: {type: momentum, lr: 0.05, momentum: 0.9}
  partition_bytes: 16384
  log_every: 20
  replication: {replicas: $2}
YAML
  # EVERY=N: a checkpoint every N steps (and at the end), compared file by
  # file; nothing ever rolls back to one.
  [ -n "${EVERY:-}" ] &&
    echo "  checkpoint: {dir: $WORK/$1-checkpoints, every_steps: $EVERY}" >> "$WORK/$1.yaml"
  return 0
}

export MS_SERVER_NUM=3 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1
export PSTRAIN_CONNECT_TIMEOUT=60 PSTRAIN_HEARTBEAT_TIMEOUT=10
[ "$HOW" = stop ] && export PSTRAIN_HEARTBEAT_TIMEOUT=3
NODES="server_0 server_1 server_2 worker_0 worker_1"

# run NAME KILLS: the job, with KILLS servers killed while it trains, each
# started again as soon as its backup took over.
run() {
  RUN=$1
  config "$RUN" 1
  export PSTRAIN_CONFIG="$WORK/$RUN.yaml" ID_PREFIX="$RUN"
  HTTP=$(($(pick_port 9) + 1))
  PSTRAIN_HTTP_PORT=$HTTP start_scheduler
  for n in $NODES; do
    # "cut": server 1 closes its link to its backup at its 40th change.
    if [ "$HOW" = cut ] && [ "$RUN" = killed ] && [ "$n" = server_1 ]; then
      export PSTRAIN_TEST_FAULT=close:40
      start "$n"
      unset PSTRAIN_TEST_FAULT
    else
      start "$n"
    fi
  done
  # The process holding each server rank now (NAME for start and node_log).
  now_0=server_0 now_1=server_1 now_2=server_2
  k=0
  while [ "$k" -lt "$2" ]; do
    # A step well into the job, then a random server.
    wait_for_count "epoch: [0-9]* step: " "$(node_log worker_0)" $((k * 3 + 2)) 1200 ||
      fail "$RUN: worker 0 did not get to its progress line $((k * 3 + 2))"
    victim=$(awk -v s="$$" -v k="$k" 'BEGIN { srand(s * 10 + k); print int(rand() * 3) }')
    # VICTIMS="2 1 0": these servers, in turn (to replay a run).
    [ -n "${VICTIMS:-}" ] && victim=$(echo "$VICTIMS" | cut -d' ' -f$((k + 1)))
    eval "proc=\$now_$victim"
    lost=$(count "lost server $victim:" "$(node_log scheduler)")
    joined=$(count "server $victim joins as a backup" "$(node_log scheduler)")
    k=$((k + 1))
    if [ "$HOW" = stop ]; then
      if [ -n "${PROBE:-}" ] && [ "$k" = 1 ]; then
        # The probe itself: a live server answers its pull.
        start_probe "$proc" "$victim"
        touch "$WORK/go"
        check_probe 1
      fi
      [ -n "${PROBE:-}" ] && start_probe "$proc" "$victim"
      kill -STOP "$(node_pid "$proc")"
      T0=$(now_ms)
      echo "  $RUN: stop $k: server $victim (SIGSTOP)"
    else
      kill -9 "$(node_pid "$proc")"
      wait "$(node_pid "$proc")" 2> /dev/null
      echo "  $RUN: kill $k: server $victim (SIGKILL)"
    fi
    wait_for_count "lost server $victim: server [0-9]* holds its partitions now" \
      "$(node_log scheduler)" $((lost + 1)) 300 || fail "$RUN: server $victim was not replaced by its backup"
    if [ "$HOW" = stop ]; then
      echo "  $RUN: its backup took over $(($(now_ms) - T0)) ms after the stop" \
        "(heartbeat timeout $PSTRAIN_HEARTBEAT_TIMEOUT s)"
      if [ -n "${PROBE:-}" ]; then
        touch "$WORK/go"  # its pull waits in the sleeping server's socket
        sleep 0.3
      fi
      kill -CONT "$(node_pid "$proc")"
      [ -n "${PROBE:-}" ] && check_probe 0
    else
      # A new node: a process of its own, with a node id never seen.
      eval "now_$victim=server_$victim-restart$k"
      eval "start \$now_$victim"
    fi
    # Started again or woken: it joins as a backup, and the next kill waits
    # until the scheduler hears that every server's backups hold all it
    # holds in that view (a loss before then rolls back, or ends the job).
    wait_for_count "server $victim joins as a backup" "$(node_log scheduler)" $((joined + 1)) 300 ||
      fail "$RUN: server $victim did not join again as a backup"
    view=$(grep -o "server $victim joins as a backup (view [0-9]*" "$(node_log scheduler)" |
      tail -n 1 | grep -o "[0-9]*$")
    wait_for_count "backups of every live server hold all it holds (view $view)" \
      "$(node_log scheduler)" 1 300 || fail "$RUN: the backups did not hold everything in view $view"
    [ "$k" = 1 ] && check_live_view "$view"
  done
  for n in scheduler worker_0 worker_1; do
    wait_exit "$n" 3000
    [ "$status" = 0 ] || fail "$RUN: $n exited $status"
  done
  for s in 0 1 2; do
    eval "proc=\$now_$s"
    wait_exit "$proc" 300
    [ "$status" = 0 ] || fail "$RUN: $proc exited $status"
  done
  # The sum of the servers' own partitions' fingerprints.
  for s in 0 1 2; do
    eval "proc=\$now_$s"
    grep -o "server $s's own [0-9]* partitions, digest [0-9a-f]*" "$(node_log "$proc")" | tail -n 1
  done | awk '{ n += $4; print $7 }
    END { print "partitions " n > "/dev/stderr" }' > "$WORK/$RUN.digests" 2> "$WORK/$RUN.count"
  python3 -c "
import sys
print('%016x %s' % (sum(int(l, 16) for l in open(sys.argv[1]).read().split()) % 2**64,
                    open(sys.argv[2]).read().split()[1]))" "$WORK/$RUN.digests" "$WORK/$RUN.count" \
    > "$WORK/$RUN.model"
  echo "  $RUN: model fingerprint $(cat "$WORK/$RUN.model") partitions"
  if grep -q "pausing the job" "$(node_log scheduler)"; then fail "$RUN: the job rolled back"; fi
  [ "$MODEL" = wide_deep ] && check_tables
  return 0
}

# start_probe PROC RANK: a probe (tests/stale_pull_probe.cc) introduces
# itself to server PROC (rank RANK) as worker 0 of its generation, and
# sends a pull of the server's first partition once $WORK/go exists.
start_probe() {
  addr=$(grep "node id:$ID_PREFIX-$1,node ip" "$(node_log scheduler)" | tail -n 1)
  port=$(echo "$addr" | sed 's/.*node port:\([0-9]*\).*/\1/')
  gen=$(grep -o "(node id $ID_PREFIX-$1, generation [0-9]*)" "$(node_log "$1")" | tail -n 1 |
    grep -o "[0-9]*)$" | tr -d ')')
  [ -n "$port" ] && [ -n "$gen" ] || fail "$RUN: no port or generation of $1 to probe"
  # The last probe's words must be gone before this one's are waited for.
  rm -f "$WORK/go" "$WORK/probe.out"
  timeout 180 "$PROBE" "$PSTRAIN_CONFIG" 127.0.0.1 "$port" "$2" 3 "$gen" "$WORK/go" \
    > "$WORK/probe.out" 2>&1 &
  probe_pid=$!
  wait_for_count "took the Hello" "$WORK/probe.out" 1 300 ||
    fail "$RUN: the probe could not introduce itself: $(cat "$WORK/probe.out")"
}
# check_probe RC: the probe's exit: 1, the pull answered (a live server); 0,
# its link closed unanswered (a server woken after its backup took over).
check_probe() {
  wait "$probe_pid"
  rc=$?
  [ "$rc" = "$1" ] || fail "$RUN: probe exit $rc, expected $1: $(cat "$WORK/probe.out")"
  echo "  $RUN: $(tail -n 1 "$WORK/probe.out")"
}

# check_live_view VIEW: the scheduler's /status and /metrics show each
# server rank's primary and its one backup, holding all it holds.
check_live_view() {
  command -v curl > /dev/null || return 0
  curl -s -m 5 "http://127.0.0.1:$HTTP/status" > "$WORK/status.json" ||
    fail "$RUN: no /status from the scheduler"
  python3 - "$WORK/status.json" "$1" << 'PY' || fail "$RUN: /status does not show the replicas"
import json, sys
r = json.load(open(sys.argv[1]))["job"]["replication"]
assert r["replicas"] == 1 and r["view"] == int(sys.argv[2]), r
assert [s["rank"] for s in r["shards"]] == [0, 1, 2], r
for s in r["shards"]:
    assert len(s["backups"]) == 1 and s["primary"] not in s["backups"], s
    assert s["backups_hold_all"], s
print("  /status: view %d, primaries %s" % (r["view"], [s["primary"] for s in r["shards"]]))
PY
  curl -s -m 5 "http://127.0.0.1:$HTTP/metrics" | grep -q '^pstrain_replication_backups_hold_all{rank="0"} 1$' ||
    fail "$RUN: /metrics does not show the replicas"
}

# check_tables: every table share's backups hold what its primary holds;
# RUN.rows gets the rows of each table over the primaries, RUN.auc the
# mean test AUC of the last three epochs.
check_tables() {
  for s in 0 1 2; do
    eval "proc=\$now_$s"
    grep -o "replication: table .*" "$(node_log "$proc")"
  done > "$WORK/$RUN.shares"
  python3 - "$WORK/$RUN.shares" "$WORK/$RUN.rows" "${MODE:-async}" << 'PY' || fail "$RUN: a backup's table copy differs from its primary's"
import re, sys
shares, rows = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"replication: table '(.*)' of server (\d+)'s rows \((\w+)\): (\d+) rows, (\d+) updates, digest (\w+)", line)
    if not m:
        continue
    table, origin, role, n, updates, digest = m.groups()
    shares.setdefault((table, origin), {}).setdefault(role, []).append((int(n), int(updates), digest))
bad = 0
for (table, origin), by_role in sorted(shares.items()):
    primary = by_role.get("primary", [])
    backups = by_role.get("backup", [])
    if len(primary) != 1 or not backups or any(b != primary[0] for b in backups):
        print("  table %s of server %s: primary %s, backups %s" % (table, origin, primary, backups))
        bad += 1
        continue
    n, updates, digest = rows.get(table, (0, 0, 0))
    rows[table] = (n + primary[0][0], updates + primary[0][1],
                   (digest + int(primary[0][2], 16)) % 2**64)
# In sync the rows themselves are the same in every run: their digest too.
exact = sys.argv[3] == "sync"
open(sys.argv[2], "w").write(", ".join(
    "'%s' %d rows %d updates%s" % (t, n, u, " digest %016x" % d if exact else "")
    for t, (n, u, d) in sorted(rows.items())) + "\n")
print("  %d table shares: each backup's copy is its primary's, bit for bit" % len(shares))
sys.exit(1 if bad or not shares else 0)
PY
  grep "test AUC" "$(node_log worker_0)" | tail -n 3 | sed 's/.*test AUC: \([0-9.]*\).*/\1/' |
    awk '{ s += $1 } END { if (NR) printf "%.5f\n", s / NR }' > "$WORK/$RUN.auc"
  echo "  $RUN: tables $(cat "$WORK/$RUN.rows"); test AUC $(cat "$WORK/$RUN.auc") (last three epochs)"
}

# double: two servers killed at once, with no checkpoint: the second is lost
# before its backups hold all it holds, so the job ends with an error
# naming what was lost (with a checkpoint it would roll back).
if [ "$HOW" = double ]; then
  RUN=double
  config "$RUN" 1
  export PSTRAIN_CONFIG="$WORK/$RUN.yaml" ID_PREFIX="$RUN"
  start_scheduler
  for n in $NODES; do start "$n"; done
  wait_for_count "epoch: [0-9]* step: " "$(node_log worker_0)" 2 1200 ||
    fail "$RUN: worker 0 did not get to its second progress line"
  kill -9 "$(node_pid server_0)" "$(node_pid server_1)"
  for n in scheduler worker_0 worker_1 server_2; do
    wait_exit "$n" 1200
    [ "$status" = 0 ] && fail "$RUN: $n exited 0 after two of three servers were lost at once"
  done
  grep "before its backups held all it holds" "$(node_log scheduler)" | cut -c 1-300 |
    grep . || fail "$RUN: the scheduler did not say what was lost"
  echo "replication_test: passed (two servers lost at once: the job ended, naming what was lost)"
  exit 0
fi

[ "$HOW" = cut ] && KILLS=0
run calm 0
run killed "$KILLS"
if [ "$HOW" = cut ]; then
  grep -q "test fault: closing the connection" "$(node_log server_1)" ||
    fail "server 1 did not close its link to its backup"
  grep "linking again and sending it every state" "$(node_log server_1)" | cut -c 1-250 | grep . ||
    fail "server 1 did not link to its backup again"
  if grep -q "lost server\|pausing the job" "$(node_log scheduler)"; then
    fail "a link cut while both servers lived cost a server or a rollback"
  fi
fi
# The checkpoints, written by whichever server held each rank's partitions
# then: the same bytes.
[ -n "${EVERY:-}" ] && for f in "$WORK"/calm-checkpoints/step-*/server-*.ckpt; do
  cmp -s "$f" "$WORK/killed-checkpoints/$(basename "$(dirname "$f")")/$(basename "$f")" ||
    fail "the killed job's checkpoint file $(basename "$f") differs from the calm one's"
done
[ -n "${EVERY:-}" ] &&
  echo "  the checkpoints' $(ls "$WORK"/calm-checkpoints/step-*/server-*.ckpt | wc -l) server files are the same bytes"
grep -h "lost server\|joins as a backup (" "$(node_log scheduler)" | cut -c 1-200
if [ "$MODEL" = wide_deep ]; then
  [ "$(cat "$WORK/calm.rows")" = "$(cat "$WORK/killed.rows")" ] ||
    fail "the killed job's tables hold $(cat "$WORK/killed.rows") the calm one's $(cat "$WORK/calm.rows")"
  awk -v a="$(cat "$WORK/calm.auc")" -v b="$(cat "$WORK/killed.auc")" \
    'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.002) }' ||
    fail "the killed job's test AUC $(cat "$WORK/killed.auc") is not within 0.002 of $(cat "$WORK/calm.auc")"
  if [ "${MODE:-async}" = sync ]; then
    [ "$(cat "$WORK/calm.model")" = "$(cat "$WORK/killed.model")" ] ||
      fail "the killed job's dense weights differ from the calm one's"
  fi
  echo "replication_test: passed ($KILLS servers lost ($HOW), every table row and update kept, AUC within 0.002)"
  exit 0
fi
[ "$(cat "$WORK/calm.model")" = "$(cat "$WORK/killed.model")" ] ||
  fail "the killed job's weights differ from the calm one's"
echo "replication_test: passed ($KILLS servers lost ($HOW), the same weights bit for bit)"
