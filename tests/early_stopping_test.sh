#!/bin/sh
# Validation, early stopping and keep_best as a user meets them, on a tiny
# click-data job of 2 workers (8 steps an epoch) whose validation metric
# is scripted (PSTRAIN_TEST_VALIDATION_METRICS: epoch 1's, epoch 2's, ...):
# the job stops after the epoch the rule says, exits 0, checkpoints that
# step, keeps the best epoch's checkpoint past `keep` and names it in BEST;
# min_delta counts; a resumed job counts its patience from the same best;
# rules that cannot work are refused (exit 2) naming the key.
# Usage: sh tests/early_stopping_test.sh PSTRAIN_BIN
set -u
BIN="$1"
. "$(dirname "$0")/check_util.sh"

# job CKPT_DIR SETS...: the tiny job for 8 epochs with a validation set.
job() {
  ckpt=$1
  shift
  "$BIN" local --config "$TINY" --servers 1 --workers 2 --set train.steps=0 \
    --set train.epochs=8 --set "data.validation=[$DATA/tiny/test.txt]" \
    --set "train.checkpoint={dir: $ckpt, keep: 1, keep_best: true}" "$@" > "$OUT" 2>&1
}

# Best at epoch 2 (0.7), no better for 2 epochs: stops after epoch 4, step 32.
PSTRAIN_TEST_VALIDATION_METRICS=0.5,0.7,0.6,0.65,0.9 \
  job "$DATA/ck" --set "train.early_stopping={patience: 2}"; status=$?
check "an early-stopped job exits 0 (got $status)" [ "$status" = 0 ]
check "each epoch measures the validation set" has "epoch: 1 validation AUC: "
check "epoch 2 is the best so far" has "epoch: 2 validation AUC: .* (best so far)"
check "it stops after epoch 4, saying why" \
  has "early stopping after epoch 4: validation auc has not improved on 0.7000 (epoch 2, step 16) by more than 0 for 2 epochs"
check "no epoch 5 is trained" sh -c "! grep -q 'epoch: 5 ' '$OUT'"
check "the stop's step is checkpointed" [ -f "$DATA/ck/step-000000000032/MANIFEST" ]
check "the best epoch's checkpoint is kept past keep: 1" [ -f "$DATA/ck/step-000000000016/MANIFEST" ]
check "no other is" [ "$(ls "$DATA/ck" | grep -c '^step-')" = 2 ]
check "BEST names it" grep -q "step 16" "$DATA/ck/BEST"
"$BIN" eval --config "$TINY" --checkpoint "$DATA/ck/step-000000000016/" > "$OUT" 2>&1; status=$?
check "pstrain eval reads the best checkpoint (got $status)" [ "$status" = 0 ]
check "it says which step it read" has "checkpoint step 16:"

# Resumed for more epochs: patience counts from epoch 2's best, so epoch 5
# (0.65 < 0.7) makes three epochs without improvement: stop after epoch 5.
PSTRAIN_TEST_VALIDATION_METRICS=0.5,0.7,0.6,0.65,0.65,0.9 \
  job "$DATA/ck" --set "train.early_stopping={patience: 3}" --resume; status=$?
check "a resumed job exits 0 (got $status)" [ "$status" = 0 ]
check "it resumes at step 32" has "resum.* step 32"
check "its patience counts from the recorded best" \
  has "early stopping after epoch 5: validation auc has not improved on 0.7000 (epoch 2, step 16)"

# A damaged BEST is named and ignored: the resumed job counts its best
# afresh, so epoch 6's 0.1 is the best so far and patience 3 does not stop
# it before epoch 8 (counting from epoch 2's 0.7 would stop it at epoch 6).
printf 'damaged' | dd of="$DATA/ck/BEST" bs=1 seek=12 conv=notrunc 2> /dev/null
PSTRAIN_TEST_VALIDATION_METRICS=0.5,0.7,0.6,0.65,0.65,0.1,0.1,0.1 \
  job "$DATA/ck" --set "train.early_stopping={patience: 3}" --resume; status=$?
check "a job resumed with a damaged BEST exits 0 (got $status)" [ "$status" = 0 ]
check "it names the damaged file and ignores it" \
  has "ck/BEST.*: ignored, the best validation metric is counted afresh"
check "its best is counted afresh" has "epoch: 6 validation AUC: .*auc 0.1 from .* (best so far)"
check "it runs to epoch 8" has "epoch: 8 validation AUC: "
check "it writes a sound BEST again" grep -q "step 48" "$DATA/ck/BEST"

# A held-out share of train as the validation set: measured every epoch.
"$BIN" local --config "$TINY" --servers 1 --workers 2 --set train.steps=0 --set train.epochs=2 \
  --set data.validation_fraction=0.25 --set "train.early_stopping={patience: 2}" > "$OUT" 2>&1
status=$?
check "validation_fraction: exit 0 (got $status)" [ "$status" = 0 ]
check "validation_fraction: the held-out samples are measured" \
  has "epoch: 2 validation AUC: .* (134 samples)"
check "validation_fraction: the others are trained on (378 + 134 = 512)" \
  has "worker 0 trains 10 steps (5 per epoch, batch 32) on 378 samples"

# min_delta: 0.705 and 0.709 are not more than 0.01 above 0.7.
PSTRAIN_TEST_VALIDATION_METRICS=0.5,0.7,0.705,0.709,0.9 \
  job "$DATA/ck-delta" --set "train.early_stopping={patience: 2, min_delta: 0.01}"; status=$?
check "min_delta: exit 0 (got $status)" [ "$status" = 0 ]
check "min_delta: stops after epoch 4" has "early stopping after epoch 4: .* by more than 0.01 for 2 epochs"

# Lower is better for logloss: the measured one, 8 epochs, no early stop
# unless it stalls; the job ends by itself either way, exit 0.
job "$DATA/ck-loss" --set "train.early_stopping={metric: logloss, patience: 8}"; status=$?
check "metric logloss: exit 0 (got $status)" [ "$status" = 0 ]
check "metric logloss: all 8 epochs run" has "epoch: 8 test AUC"

# Rules that cannot work.
"$BIN" check --config "$TINY" --set "train.early_stopping={patience: 2}" > "$OUT" 2>&1; status=$?
check "early_stopping without validation exits 2 (got $status)" [ "$status" = 2 ]
check "it names data.validation" has "train.early_stopping (from --set): needs data.validation"
"$BIN" check --config "$TINY" --set "data.validation=[$DATA/tiny/test.txt]" \
  --set "train.early_stopping={metric: accuracy}" > "$OUT" 2>&1; status=$?
check "a metric the loss does not give exits 2 (got $status)" [ "$status" = 2 ]
check "it names the metric" has "train.early_stopping.metric.*accuracy is not measured for loss bce_with_logits"
"$BIN" check --config "$TINY" --set "train.checkpoint={dir: $DATA/x, keep_best: true}" > "$OUT" 2>&1
status=$?
check "keep_best without validation exits 2 (got $status)" [ "$status" = 2 ]
check "it names keep_best" has "train.checkpoint.keep_best.*needs data.validation"
"$BIN" check --config "$TINY" --set "data.validation=[$DATA/tiny/test.txt]" --set train.mode=average \
  --set train.average_every=4 --set "train.early_stopping={patience: 2}" > "$OUT" 2>&1; status=$?
check "early_stopping in mode average exits 2 (got $status)" [ "$status" = 2 ]
check "it says why" has "train.early_stopping.*does not work with mode: average"

echo "early_stopping_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
