#!/bin/sh
# pstrain export and eval, on data made here so it always runs:
#   1. an MLP (one weight in 2 partitions on 2 servers, one all-reduced) on
#      a tiny IDX set:
#      eval prints exactly the accuracy the training log ended with; the
#      export has every weight with its shape, and numpy alone, running the
#      exported MLP, scores that accuracy too; eval with another model
#      fails in one line;
#   2. Wide&Deep on `pstrain gen criteo` data (tables on 2 servers): eval
#      prints the AUC line training ended with; the export has both tables
#      (ids, rows) and the dense weights with their shapes; the same with
#      the data read as csv whose columns name their tables;
#   3. a damaged checkpoint file: export and eval fail with one line, exit 1,
#      and leave no output file.
# usage: export_eval_test.sh PSTRAIN
BIN=$1
[ -x "$BIN" ] || { echo "usage: $0 PSTRAIN"; exit 2; }
WORK=$(mktemp -d) && [ -d "$WORK" ] || exit 1
. "$(dirname "$0")/cluster_util.sh"
TOOLS=$(dirname "$0")/tools
trap '[ -n "$KEEP" ] || rm -rf "$WORK"' EXIT
PY=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import numpy' 2> /dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "skipped: no python3 with numpy (apt-get install python3-numpy)"; exit 77; }

# train NAME SERVERS WORKERS: trains WORK/NAME.yaml; the log is WORK/NAME.log.
train() {
  timeout 120 "$BIN" local --config "$WORK/$1.yaml" --servers "$2" --workers "$3" \
    > "$WORK/$1.log" 2>&1 || fail "training $1"
}
# same_metric NAME: eval prints the metric of the training log's last epoch.
same_metric() {
  trained=$(grep "test \(accuracy\|AUC\)" "$WORK/$1.log" | tail -n 1 | sed 's/.*test /test /')
  [ -n "$trained" ] || fail "$1: no test metric in the training log"
  timeout 60 "$BIN" eval --config "$WORK/$1.yaml" --checkpoint "$WORK/$1-ckpt" \
    > "$WORK/$1.eval" 2>&1 || fail "$1: eval: $(cat "$WORK/$1.eval")"
  evaluated=$(sed 's/.*test /test /' "$WORK/$1.eval")
  [ "$trained" = "$evaluated" ] || fail "$1: training ended with '$trained', eval says '$evaluated'"
  echo "$1: eval matches training: $evaluated"
}
export_model() {
  timeout 60 "$BIN" export --checkpoint "$WORK/$1-ckpt" --out "$WORK/$1.npz" \
    > "$WORK/$1.export" 2>&1 || fail "$1: export: $(cat "$WORK/$1.export")"
  cat "$WORK/$1.export"
}

# 1. The MLP.
"$PY" "$TOOLS/tiny_idx.py" "$WORK/idx" || fail "tiny_idx.py"
cat > "$WORK/mlp.yaml" << EOF
model:
  input: [1, 8, 8]
  loss: softmax_cross_entropy
  layers:
    - flatten
    - {name: fc1, type: linear, out: 32}
    - relu
    - {name: fc2, type: linear, out: 3}
data:
  format: idx
  train: [idx/train-images, idx/train-labels]
  test: [idx/test-images, idx/test-labels]
parameters:
  - {match: "fc1*", ps: true}
  - {match: "fc2*", ps: false}
train:
  epochs: 1
  batch_size: 32
  mode: sync
  optimizer: {type: momentum, lr: 0.05, momentum: 0.9}
  seed: 1
  log_every: 1000
  partition_bytes: 4096      # fc1.weight in 2 parts, one per server
  checkpoint: {dir: $WORK/mlp-ckpt, every_steps: 10, keep: 2}
EOF
train mlp 2 2
same_metric mlp
export_model mlp
accuracy=$(sed 's/.*test accuracy: \([0-9.]*\).*/\1/' "$WORK/mlp.eval")
"$PY" "$TOOLS/export_check.py" "$WORK/mlp.npz" fc1.weight=f4:32,64 fc1.bias=f4:32 \
  fc2.weight=f4:3,32 fc2.bias=f4:3 \
  --mlp "$WORK/idx/test-images" "$WORK/idx/test-labels" "$accuracy" || fail "mlp export"

# A config whose model differs from the checkpoint's: one line naming the weight.
sed 's/out: 32}/out: 16}/' "$WORK/mlp.yaml" > "$WORK/mlp16.yaml"
"$BIN" eval --config "$WORK/mlp16.yaml" --checkpoint "$WORK/mlp-ckpt" > /dev/null 2> "$WORK/changed.err" &&
  fail "eval of another model succeeded"
grep -q "'fc1.weight' has another shape" "$WORK/changed.err" || fail "eval: $(cat "$WORK/changed.err")"
echo "eval with another model: $(cat "$WORK/changed.err")"

# 2. Wide&Deep with server-held tables.
"$BIN" gen criteo --rows 4000 --shards 2 --test-rows 1000 --out "$WORK/criteo" \
  > "$WORK/gen.out" 2>&1 || fail "gen criteo"
job_config wide_deep "$WORK/criteo" 2 "$WORK/wd-ckpt" > "$WORK/wd.yaml"
sed -i "s|^  train: \[$WORK/criteo/train.txt\]|&\n  test: [$WORK/criteo/test.txt]|" "$WORK/wd.yaml"
grep -q "test:" "$WORK/wd.yaml" || fail "no test set in wd.yaml"
train wd 2 2
same_metric wd
export_model wd
"$PY" "$TOOLS/export_check.py" "$WORK/wd.npz" wide_emb.weight=table:1 deep_emb.weight=table:8 \
  fc1.weight=f4:32,221 fc1.bias=f4:32 fc2.weight=f4:1,32 fc2.bias=f4:1 \
  "data_schema=criteo:wide_emb.weight:$WORK/criteo/train.txt-00000" || fail "wd export"

# 2b. The same files read as csv whose columns name their tables: the wide
# table reads C1..C13, the deep one (1000 rows now) C14..C26. Eval numbers
# each table's ids apart as training does, and each value of a line hashes
# into its own table's rows, as the exported schema says.
by_column < "$WORK/wd.yaml" |
  sed -e 's/vocab: 65536, dim: 8/vocab: 1000, dim: 8/' -e "s|$WORK/wd-ckpt|$WORK/wdt-ckpt|" \
    > "$WORK/wdt.yaml"
train wdt 2 2
same_metric wdt
export_model wdt
"$PY" "$TOOLS/export_check.py" "$WORK/wdt.npz" wide_emb.weight=table:1 deep_emb.weight=table:8 \
  fc1.weight=f4:32,117 fc1.bias=f4:32 fc2.weight=f4:1,32 fc2.bias=f4:1 \
  "data_schema=csv:wide_emb.weight:$WORK/criteo/train.txt-00000" \
  "data_schema=csv:deep_emb.weight:$WORK/criteo/train.txt-00000" || fail "export, tables by column"

# 3. One flipped byte in the newest step's server-0.ckpt.
step=$(ls -d "$WORK"/wd-ckpt/step-* | tail -n 1)
[ -f "$step/server-0.ckpt" ] || fail "no server-0.ckpt in $step"
size=$(stat -c %s "$step/server-0.ckpt")
printf '\377' | dd of="$step/server-0.ckpt" bs=1 seek=$((size / 2)) conv=notrunc 2> /dev/null
damaged_checkpoint_fails "$WORK/wd-ckpt" "$WORK/wd.yaml" "a damaged checkpoint" server-0.ckpt
echo "export_eval: ok"
