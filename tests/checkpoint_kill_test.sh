#!/bin/sh
# Torn checkpoints: `pstrain local` checkpointing after every step
# is killed with SIGKILL at a random moment (0.05 to 1 s after it starts,
# longer on a busy machine: see `window`),
# KILLS times, each run resuming from what the last one left. Checked:
#   - every run that resumes, on every node, resumes at the newest step whose
#     MANIFEST exists (a MANIFEST is written last, atomically, once every
#     file it lists is in place: src/common/checkpoint_file.h), never at a
#     step without one (torn: killed mid-checkpoint), and starts from
#     scratch when there is none;
#   - some kills did tear a checkpoint (or the test tested nothing);
#   - a last run, not killed, finishes, and its final all-reduced weights and
#     worker places are byte for byte those of a run never killed. (The server
#     shards are not compared as bytes: with two workers, a server meets the
#     workers' lookups of a step in either order, which orders new table rows
#     differently even between two straight runs; tests/checkpoint_resume_test
#     compares them row by row.)
# The job: Wide&Deep on generated click data, tables and a dense tensor on 2
# servers, the MLP all-reduced between 2 workers.
# Usage: sh tests/checkpoint_kill_test.sh PSTRAIN_BIN [KILLS] [SEED]
set -u
BIN="$1"
KILLS="${2:-50}"
SEED="${3:-$$}"
STEPS=800
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "checkpoint_kill_test: $KILLS kills, seed $SEED, in $WORK"

. "$(dirname "$0")/cluster_util.sh"
# Its own: this test's runs all write one log.
fail() { echo "FAILED: $*"; [ -f "$WORK/log" ] && tail -n 20 "$WORK/log"; exit 1; }

gen_criteo "$WORK/data" 4000

# config DIR RESUME EVERY: the job, checkpointing into DIR.
config() {
  job_config wide_deep "$WORK/data" 1 - "steps: $STEPS" \
    "checkpoint: {dir: $1, every_steps: $3, resume: $2, keep: 3}"
}
CKPT="$WORK/ckpt"
config "$CKPT" true 1 > "$WORK/killed.yaml"
config "$WORK/straight" false 0 > "$WORK/straight.yaml"

# The newest step of $CKPT with a MANIFEST (0: none), and how many steps
# newer than it have none.
newest_complete() {
  n=0
  for m in "$CKPT"/step-*/MANIFEST; do
    [ -f "$m" ] || continue
    s=$(basename "$(dirname "$m")" | sed 's/^step-0*//')
    [ "${s:-0}" -gt "$n" ] && n=${s:-0}
  done
  echo "$n"
}
torn_newer_than() {
  t=0
  for d in "$CKPT"/step-*; do
    [ -d "$d" ] || continue
    s=$(basename "$d" | sed 's/^step-0*//')
    [ "${s:-0}" -gt "$1" ] && [ ! -f "$d/MANIFEST" ] && t=$((t + 1))
  done
  echo "$t"
}

# check_resume EXPECTED: every node of the last run that got as far as
# choosing a checkpoint chose step EXPECTED. Prints how many nodes did.
check_resume() {
  chose=0
  for s in $(sed -n 's/.*resuming at step \([0-9]*\) from.*/\1/p' "$WORK/log") \
           $(sed -n 's/.*embedding tables from .* (step \([0-9]*\))$/\1/p' "$WORK/log"); do
    [ "$s" = "$1" ] || fail "run $i resumed at step $s; the newest complete checkpoint is $1"
    chose=$((chose + 1))
  done
  if [ "$1" = 0 ]; then
    grep -q "resuming at step" "$WORK/log" && fail "run $i resumed with no complete checkpoint"
  fi
  echo "$chose"
}

torn_seen=0
resumes=0
i=0
# The kill comes 0.05 s to `window` s after the start. A busy machine can
# take longer than 1 s to reach the first checkpoint: while a run neither
# resumed nor left a newer complete checkpoint, the window grows by half,
# up to 5 s, and shrinks back towards 1 s after a run that did, so that the
# test tests the same thing however slow the machine is (and stays within
# its time: 50 kills of at most 5 s).
window=1
while [ "$i" -lt "$KILLS" ]; do
  i=$((i + 1))
  expected=$(newest_complete)
  torn=$(torn_newer_than "$expected")
  [ "$torn" -gt 0 ] && torn_seen=$((torn_seen + 1))
  delay=$(awk -v s="$SEED" -v i="$i" -v w="$window" \
    'BEGIN { srand(s * 1000 + i); printf "%.3f", 0.05 + (w - 0.05) * rand() }')
  "$BIN" local --config "$WORK/killed.yaml" --servers 2 --workers 2 > "$WORK/log" 2>&1 &
  pid=$!
  # Not a wait for a condition: the random moment of the kill is the test.
  sleep "$delay"
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  chose=$(check_resume "$expected") || { echo "$chose"; exit 1; }
  [ "$chose" -gt 0 ] && resumes=$((resumes + 1))
  if [ "$chose" -eq 0 ] && [ "$(newest_complete)" = "$expected" ]; then
    window=$(awk -v w="$window" 'BEGIN { w *= 1.5; printf "%.3f", (w > 5 ? 5 : w) }')
  else
    window=$(awk -v w="$window" 'BEGIN { w /= 1.5; printf "%.3f", (w < 1 ? 1 : w) }')
  fi
done
expected=$(newest_complete)
echo "after $KILLS kills: newest complete step $expected of $STEPS; $torn_seen runs began with a" \
  "torn checkpoint; $resumes runs got as far as resuming; kill window ${window} s"
[ "$torn_seen" -gt 0 ] || fail "no kill tore a checkpoint: nothing was tested"
[ "$resumes" -gt 0 ] || fail "no run got as far as resuming"

i=final
"$BIN" local --config "$WORK/killed.yaml" --servers 2 --workers 2 > "$WORK/log" 2>&1 ||
  fail "the last run (not killed) failed"
chose=$(check_resume "$expected") || { echo "$chose"; exit 1; }
[ "$expected" = 0 ] || [ "$chose" -gt 0 ] || fail "the last run did not resume"
"$BIN" local --config "$WORK/straight.yaml" --servers 2 --workers 2 > "$WORK/log" 2>&1 ||
  fail "the run never killed failed"
last=$(printf 'step-%012d' "$STEPS")
for f in allreduced-weights worker-0.ckpt worker-1.ckpt; do
  cmp -s "$CKPT/$last/$f" "$WORK/straight/$last/$f" ||
    fail "$f of step $STEPS differs from the run never killed"
done
echo "checkpoint_kill_test: passed"
