#!/bin/sh
# Checkpoint figures: for LeNet on Fashion-MNIST and Wide&Deep on
# 1M generated click rows, `pstrain local` (2 servers, 2 workers) runs STEPS
# steps with a checkpoint every 100 and without, alternating (the machine is
# shared and noisy: side by side, the same noise hits both), ROUNDS times
# each. Prints per run the samples/s worker 0 reports, and per checkpoint the
# write time and size the chief logs ("checkpoint of step N written to D in
# S s (F files, B bytes)"); then the medians.
# Usage: sh tests/bench/checkpoint_bench.sh PSTRAIN_BIN [ROUNDS] [STEPS]
set -u
BIN="$1"
ROUNDS="${2:-3}"
STEPS="${3:-300}"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# derive SRC OUT CKPT_DIR TRAIN_FILE: SRC with STEPS steps, no test set, a
# checkpoint every 100 steps into CKPT_DIR (none when it is "-"), and
# TRAIN_FILE as its training data (unchanged when "-").
derive() {
  ckpt=""
  [ "$3" != "-" ] && ckpt="  checkpoint: {dir: $3, every_steps: 100, keep: 2}"
  awk -v steps="$STEPS" -v ckpt="$ckpt" -v train="$4" '
    /^train:/ { print; print "  steps: " steps; if (ckpt != "") print ckpt; next }
    /^  test:/ { skip = /\]/ ? 0 : 1; next }
    skip { if (/\]/) skip = 0; next }
    train != "-" && /^  train:/ { print "  train: [" train "]"; next }
    { print }' "$1" > "$2"
}

# run NAME CONFIG: one job; appends its samples/s, and each checkpoint's
# seconds and bytes, to $WORK/NAME.{rate,secs,bytes}.
run() {
  "$BIN" local --config "$2" --servers 2 --workers 2 > "$WORK/log" 2>&1 || {
    echo "FAILED: $1"; tail -n 5 "$WORK/log"; exit 1; }
  rate=$(sed -n 's/.*worker 0 finished .* s: \([0-9.]*\) samples\/s.*/\1/p' "$WORK/log")
  echo "$rate" >> "$WORK/$1.rate"
  sed -n 's/.*checkpoint of step .* in \([0-9.]*\) s (.*/\1/p' "$WORK/log" >> "$WORK/$1.secs"
  sed -n 's/.*checkpoint of step .* files, \([0-9]*\) bytes).*/\1/p' "$WORK/log" >> "$WORK/$1.bytes"
  echo "  $1: $rate samples/s"
}

bench() {
  name="$1" src="$2" train="$3"
  derive "$src" "$WORK/$name-none.yaml" - "$train"
  derive "$src" "$WORK/$name-ckpt.yaml" "$WORK/ckpt-$name" "$train"
  echo "$name: $STEPS steps, 2 servers, 2 workers, $ROUNDS rounds"
  r=0
  while [ "$r" -lt "$ROUNDS" ]; do
    r=$((r + 1))
    rm -rf "$WORK/ckpt-$name"
    run "$name-none" "$WORK/$name-none.yaml"
    run "$name-ckpt" "$WORK/$name-ckpt.yaml"
  done
  none=$(median < "$WORK/$name-none.rate")
  with=$(median < "$WORK/$name-ckpt.rate")
  secs=$(median < "$WORK/$name-ckpt.secs")
  bytes=$(median < "$WORK/$name-ckpt.bytes")
  echo "$name: median samples/s: no checkpoints $none, every 100 steps $with;" \
    "median checkpoint write $secs s, $bytes bytes ($(wc -l < "$WORK/$name-ckpt.secs") checkpoints)"
}

bench lenet "$REPO/configs/lenet_fashion_mnist.yaml" -
"$BIN" gen criteo --rows 1000000 --shards 2 --test-rows 0 --out "$WORK/criteo" > /dev/null ||
  { echo "FAILED: gen criteo"; exit 1; }
bench wide_deep "$REPO/configs/wide_deep_criteo.yaml" "$WORK/criteo/train.txt"
