#!/bin/sh
# pstrain check --config F: a good config passes with a summary (samples,
# layer shapes, where each parameter lives); a missing data file fails
# naming it; a malformed config fails with the config's usual one line;
# `pstrain local` and a worker refuse a config whose test file is missing
# before they start. Data that does not fit the model (labels past the
# head's outputs, images of another shape, Criteo fields or ids past the
# tables), a layer that does not fit its input, and directories that cannot
# be written are one line naming the config key and the file, exit 2, for
# check and for a job alike. Usage: check_cmd_test.sh PSTRAIN REPO
PSTRAIN=$1
REPO=$2
DATA=/usr/share/datasets/fashion-mnist
[ -f "$DATA/t10k-images-idx3-ubyte.gz" ] || { echo "skip: Fashion-MNIST is not installed"; exit 77; }
. "$(dirname "$0")/cluster_util.sh"  # by_column (its fail is replaced below)
WORK=$(mktemp -d /tmp/pstrain-check-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$(timeout 60 "$PSTRAIN" check --config "$REPO/configs/mlp_fashion_mnist.yaml" 2>&1)
[ $? -eq 0 ] || fail "good config: $out"
echo "$out" | head -n 1 | grep -q "OK: 60000 training and 10000 test samples" || fail "good config: $out"
# The summary: each layer's output, each parameter's shape, size and place.
echo "$out" | grep -Eq "^  fc1 +linear +\[256\] +fc1.weight +\[256, 784\] +200704  PS servers$" ||
  fail "good config: no fc1 line: $out"
echo "$out" | grep -Eq "^  flatten0 +flatten +\[784\]$" || fail "good config: no flatten line: $out"
echo "$out" | grep -q "^parameters: 235146 floats; 235146 PS servers$" || fail "good config: $out"
[ "$(echo "$out" | wc -l)" -le 24 ] || fail "good config: more than a screen: $out"
out=$(timeout 60 "$PSTRAIN" check --config "$REPO/configs/lenet_hybrid.yaml" 2>&1)
echo "$out" | grep -Eq "^ +fc3.bias +\[10\] +10  all-reduced$" || fail "hybrid: fc3.bias: $out"
echo "$out" | grep -q "^parameters: 61706 floats; 2572 PS servers; 59134 all-reduced$" ||
  fail "hybrid: $out"

# A relative test path that is not there, taken from the config's directory.
sed "s#$DATA/t10k-images-idx3-ubyte.gz#missing-images.gz#" \
  "$REPO/configs/mlp_fashion_mnist.yaml" > "$WORK/missing.yaml"
out=$(timeout 60 "$PSTRAIN" check --config "$WORK/missing.yaml" 2>&1)
[ $? -eq 2 ] || fail "missing file: exit status not 2: $out"
[ "$(echo "$out" | wc -l)" -eq 1 ] || fail "missing file: not one line: $out"
echo "$out" | grep -q "$WORK/missing-images.gz" || fail "missing file not named: $out"

# The same config started: `local` and a worker refuse it at once (exit 2,
# one line naming the file), before training an epoch to find it missing.
out=$(env -u MS_ROLE timeout 60 "$PSTRAIN" local --config "$WORK/missing.yaml" \
  --servers 1 --workers 1 2>&1)
[ $? -eq 2 ] || fail "local, missing test file: exit status not 2: $out"
echo "$out" | grep -q "$WORK/missing-images.gz" || fail "local: missing file not named: $out"
echo "$out" | grep -q "running a job" && fail "local started a job first: $out"
out=$(MS_ROLE=MS_WORKER MS_SERVER_NUM=1 MS_WORKER_NUM=1 MS_SCHED_HOST=127.0.0.1 \
  MS_SCHED_PORT=1 timeout 60 "$PSTRAIN" --config "$WORK/missing.yaml" 2>&1)
[ $? -eq 2 ] || fail "worker, missing test file: exit status not 2: $out"
echo "$out" | grep -q "$WORK/missing-images.gz" || fail "worker: missing file not named: $out"

# A file of the wrong format where the images should be.
sed "s#$DATA/t10k-images-idx3-ubyte.gz#$WORK/missing.yaml#" \
  "$REPO/configs/mlp_fashion_mnist.yaml" > "$WORK/wrong.yaml"
out=$(timeout 60 "$PSTRAIN" check --config "$WORK/wrong.yaml" 2>&1)
[ $? -eq 2 ] || fail "wrong format: exit status not 2: $out"
echo "$out" | grep -q "$WORK/missing.yaml" || fail "wrong-format file not named: $out"

# expect_refused NAME CONFIG NEEDLE...: `pstrain check`, `pstrain local` and
# a worker (whose scheduler is never reached) each exit 2 at once with one
# line that names the config and every NEEDLE.
expect_refused() {
  name=$1 config=$2
  shift 2
  for how in check local worker; do
    case $how in
      check) out=$(timeout 60 "$PSTRAIN" check --config "$config" 2>&1) ;;
      local) out=$(env -u MS_ROLE timeout 60 "$PSTRAIN" local --config "$config" \
        --servers 1 --workers 1 2>&1) ;;
      worker) out=$(MS_ROLE=MS_WORKER MS_SERVER_NUM=1 MS_WORKER_NUM=1 MS_SCHED_HOST=127.0.0.1 \
        MS_SCHED_PORT=1 timeout 60 "$PSTRAIN" --config "$config" 2>&1) ;;
    esac
    status=$?
    [ $status -eq 2 ] || fail "$name, $how: exit status $status, not 2: $out"
    [ "$(echo "$out" | wc -l)" -eq 1 ] || fail "$name, $how: not one line: $out"
    for needle in "$config" "$@"; do
      echo "$out" | grep -qF -- "$needle" || fail "$name, $how: '$needle' not named: $out"
    done
  done
  echo "$name: $out"
}

# A head of 5 classes on Fashion-MNIST's 10 (it trained to a useless
# model and exited 0); images of 28x28 on a model.input of [1, 32, 32] (a
# NaN loss); a kernel larger than the image.
LENET="$REPO/configs/lenet_fashion_mnist.yaml"
sed 's/{name: fc3, type: linear, out: 10}/{name: fc3, type: linear, out: 5}/' "$LENET" > "$WORK/five.yaml"
expect_refused "5-class head" "$WORK/five.yaml" "model.layers[11].out" \
  "$DATA/train-labels-idx1-ubyte.gz" "needs labels 0..4"
sed 's/input: \[1, 28, 28\]/input: [1, 32, 32]/' "$LENET" > "$WORK/shape.yaml"
expect_refused "input shape" "$WORK/shape.yaml" "model.input is [1, 32, 32]" \
  "$DATA/train-images-idx3-ubyte.gz holds samples of [1, 28, 28]"
sed 's/out_channels: 6, kernel: 5, padding: 2/out_channels: 6, kernel: 40, padding: 2/' "$LENET" \
  > "$WORK/kernel.yaml"
expect_refused "kernel 40" "$WORK/kernel.yaml" "(conv1) at line" "kernel 40" \
  "does not fit input [1, 28, 28]"

# Labels that fit the first batch but not a later one: check reads every
# sample; a job finds it when it loads its shard, before its first step.
printf '\0\0\10\3\0\0\0\10\0\0\0\2\0\0\0\2' > "$WORK/tiny-images"
head -c 32 /dev/zero >> "$WORK/tiny-images"
printf '\0\0\10\1\0\0\0\10\0\1\2\3\0\1\11\2' > "$WORK/tiny-labels"
printf '%s\n' 'model:' '  input: [1, 2, 2]' '  layers: [flatten, {name: fc, type: linear, out: 5}]' \
  'data: {format: idx, train: [tiny-images, tiny-labels], shuffle: false}' \
  'train: {batch_size: 2, steps: 3}' > "$WORK/late.yaml"
out=$(timeout 60 "$PSTRAIN" check --config "$WORK/late.yaml" 2>&1)
[ $? -eq 2 ] || fail "later label: check: $out"
echo "$out" | grep -qF "model.layers[1].out: $WORK/tiny-labels: label 9 of sample 6" ||
  fail "later label: check: $out"
out=$(env -u MS_ROLE timeout 60 "$PSTRAIN" local --config "$WORK/late.yaml" --servers 1 \
  --workers 1 2>&1)
[ $? -eq 1 ] || fail "later label: local: exit status not 1: $out"
echo "$out" | grep -q "\[error\].*label 9 of sample 6" || fail "later label: local: $out"
echo "$out" | grep -q "loss is" && fail "later label: local trained a step: $out"

# Directories the job will write: a checkpoint directory under a file, and
# a log directory that cannot be made; ones that do not exist yet but can
# be made pass, and check leaves nothing behind.
touch "$WORK/a-file"
printf 'train:\n  checkpoint: {dir: %s}\n' "$WORK/a-file/ckpt" > "$WORK/ckpt.yaml"
out=$(timeout 60 "$PSTRAIN" check --config "$WORK/ckpt.yaml" 2>&1)
[ $? -eq 2 ] || fail "checkpoint dir under a file: $out"
echo "$out" | grep -qF "train.checkpoint.dir $WORK/a-file/ckpt: cannot be made" ||
  fail "checkpoint dir under a file: $out"
out=$(PSTRAIN_LOG_DIR="$WORK/a-file/logs" timeout 60 "$PSTRAIN" check --config "$LENET" 2>&1)
[ $? -eq 2 ] || fail "log dir under a file: $out"
echo "$out" | grep -qF "PSTRAIN_LOG_DIR $WORK/a-file/logs: cannot be made" ||
  fail "log dir under a file: $out"
mkdir "$WORK/fresh"
printf 'train:\n  checkpoint: {dir: %s}\n' "$WORK/fresh/new/ckpt" > "$WORK/fresh.yaml"
out=$(PSTRAIN_LOG_DIR="$WORK/fresh/logs" timeout 60 "$PSTRAIN" check --config "$WORK/fresh.yaml" 2>&1)
[ $? -eq 0 ] || fail "directories still to be made: $out"
[ -z "$(ls -A "$WORK/fresh")" ] || fail "check left files behind: $(ls -A "$WORK/fresh")"

# Criteo-format data against Wide&Deep: 26 categorical fields on a model
# of 20, and ids (data.vocab) past a table's rows.
"$PSTRAIN" gen criteo --rows 300 --shards 2 --test-rows 50 --out "$WORK/criteo" > /dev/null ||
  fail "gen criteo"
sed -e "s#\.\./data/criteo/#$WORK/criteo/#" -e 's/1048576/4096/g' \
  "$REPO/configs/wide_deep_criteo.yaml" > "$WORK/wd.yaml"
out=$(timeout 60 "$PSTRAIN" check --config "$WORK/wd.yaml" 2>&1)
[ $? -eq 0 ] || fail "wide&deep: $out"
echo "$out" | grep -Eq "^  deep_emb +embedding_bag +\[416\] +deep_emb.weight +\[4096, 16\] +65536  table on servers$" ||
  fail "wide&deep: no deep_emb line: $out"
sed 's/sparse_fields: 26 /sparse_fields: 20 /' "$WORK/wd.yaml" > "$WORK/wd20.yaml"
expect_refused "20 fields" "$WORK/wd20.yaml" "model.sparse_fields is 20" \
  "$WORK/criteo/train.txt-00000 has 26 categorical fields a sample"
sed 's/vocab: 4096, dim: 16/vocab: 1000, dim: 16/' "$WORK/wd.yaml" > "$WORK/wdv.yaml"
expect_refused "vocab" "$WORK/wdv.yaml" "model.deep[0].vocab is 1000 rows" \
  "$WORK/criteo/train.txt-00000 has id" "data.vocab must be at most 1000"

# The same files read as csv whose columns name their tables: wide_emb reads
# C1..C13, deep_emb (vocab 1000 now) C14..C26, so it gives 13 x 16.
by_column < "$WORK/wd.yaml" | sed 's/vocab: 4096, dim: 16/vocab: 1000, dim: 16/' > "$WORK/wdt.yaml"
out=$(timeout 60 "$PSTRAIN" check --config "$WORK/wdt.yaml" 2>&1)
[ $? -eq 0 ] || fail "tables by column: $out"
echo "$out" | grep -Eq "^  deep_emb +embedding_bag +\[208\] +deep_emb.weight +\[1000, 16\] +16000  table on servers$" ||
  fail "tables by column: no deep_emb line: $out"
echo "$out" | grep -q "^ids: embedding_bag 'wide_emb' reads columns C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11, C12, C13 (13 slots, vocab 4096)$" ||
  fail "tables by column: no wide_emb line: $out"
echo "$out" | grep -q "^ids: embedding_bag 'deep_emb' reads columns C14, .*, C26 (13 slots, vocab 1000)$" ||
  fail "tables by column: no deep_emb line: $out"

printf 'train:\n  epochs: 0\n' > "$WORK/bad.yaml"
out=$(timeout 60 "$PSTRAIN" check --config "$WORK/bad.yaml" 2>&1)
[ $? -eq 2 ] || fail "malformed config: exit status not 2: $out"
[ "$out" = "pstrain check: $WORK/bad.yaml:2: train.epochs: expected an integer >= 1, got '0'" ] ||
  fail "malformed config: $out"
echo "pstrain check: every case passed"
