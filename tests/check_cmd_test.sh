#!/bin/sh
# pstrain check --config F (issue 14): a good config passes with one summary
# line; a missing data file fails naming it; a malformed config fails with
# the config's usual one line; `pstrain local` and a worker refuse a config
# whose test file is missing before they start. Usage: check_cmd_test.sh PSTRAIN REPO
PSTRAIN=$1
REPO=$2
DATA=/usr/share/datasets/fashion-mnist
[ -f "$DATA/t10k-images-idx3-ubyte.gz" ] || { echo "skip: Fashion-MNIST is not installed"; exit 77; }
WORK=$(mktemp -d /tmp/pstrain-check-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$(timeout 60 "$PSTRAIN" check --config "$REPO/configs/mlp_fashion_mnist.yaml" 2>&1)
[ $? -eq 0 ] || fail "good config: $out"
[ "$(echo "$out" | wc -l)" -eq 1 ] || fail "good config: not one line: $out"
echo "$out" | grep -q "OK: 60000 training and 10000 test samples" || fail "good config: $out"

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

printf 'train:\n  epochs: 0\n' > "$WORK/bad.yaml"
out=$(timeout 60 "$PSTRAIN" check --config "$WORK/bad.yaml" 2>&1)
[ $? -eq 2 ] || fail "malformed config: exit status not 2: $out"
[ "$out" = "pstrain check: $WORK/bad.yaml:2: train.epochs: expected an integer >= 1, got '0'" ] ||
  fail "malformed config: $out"
echo "pstrain check: 4 cases passed; local and a worker refuse a missing test file"
