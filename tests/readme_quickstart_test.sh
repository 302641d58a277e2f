#!/bin/sh
# README's quick start, run as written: every line of the ```sh blocks under
# the headings "## A first job" and "## Your own model" runs, in order, in one
# shell with `set -e`, in a scratch directory laid out like a checkout
# (configs/, launch/, build/src/app/pstrain being the binary under test).
# Then each line of those sections' ```text blocks (the expected output) must
# match a line the commands printed, with `...`, node ids and the numbers of
# log lines standing for any text. So the test fails when a command of those
# sections stops working or its output stops looking as README shows it.
#
# Two things are not as written, as README itself says: `sh launch/build.sh`
# is not run (it installs packages and builds; the binary under test is
# that build), and configs/lenet_fashion_mnist.yaml in the scratch copy is
# shortened the way README's first-job section says (`limit: 12800` under
# `data:`, `epochs: 1`), so the job takes seconds, not minutes.
# Usage: readme_quickstart_test.sh REPO PSTRAIN
REPO=$1
PSTRAIN=$2
DATA=/usr/share/datasets/fashion-mnist
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || { echo "skip: Fashion-MNIST is not installed"; exit 77; }
case "$PSTRAIN" in /*) ;; *) PSTRAIN="$PWD/$PSTRAIN" ;; esac
WORK=$(mktemp -d /tmp/pstrain-readme-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# blocks KIND: the lines of README's ```KIND blocks under the two headings.
blocks() {
  awk -v kind="$1" '
    /^## / { section = ($0 == "## A first job" || $0 == "## Your own model") }
    /^```/ {
      if (open) { open = 0; take = 0 } else { open = 1; take = (section && $0 == "```" kind) }
      next
    }
    take { print }' "$REPO/README.md"
}

commands=$(blocks sh)
[ -n "$commands" ] || fail "README.md has no \`\`\`sh block under \"## A first job\" or \"## Your own model\""
echo "$commands" | grep -q 'pstrain local --config configs/lenet_fashion_mnist.yaml' ||
  fail "README's first job no longer runs configs/lenet_fashion_mnist.yaml: update this test"
echo "$commands" | grep -q 'pstrain check --config' || fail "README's own model is never checked"

# The checkout, with the main config shortened as README says.
# Real copies (never links into REPO): the shortened config is written here.
mkdir -p "$WORK/run/build/src/app" "$WORK/run/configs"
cp "$REPO"/configs/*.yaml "$WORK/run/configs/" || fail "cannot copy $REPO/configs"
rm -f "$WORK/run/configs/lenet_fashion_mnist.yaml"
ln -s "$REPO/launch" "$WORK/run/launch"
ln -s "$PSTRAIN" "$WORK/run/build/src/app/pstrain"
main="$WORK/run/configs/lenet_fashion_mnist.yaml"
sed -e 's/^data:.*$/&\
  limit: 12800/' -e 's/^  epochs: .*/  epochs: 1/' "$REPO/configs/lenet_fashion_mnist.yaml" > "$main"
grep -q '^  limit: 12800$' "$main" && grep -q '^  epochs: 1$' "$main" ||
  fail "could not shorten configs/lenet_fashion_mnist.yaml (no 'data:' or '  epochs:' line)"

# Every command line, but the build.
printf 'set -e\n%s\n' "$(echo "$commands" | grep -v '^sh launch/build.sh')" > "$WORK/commands.sh"
out=$(cd "$WORK/run" && env -u MS_ROLE -u PSTRAIN_CONFIG -u PSTRAIN_LOG_DIR \
  timeout 90 sh "$WORK/commands.sh" 2>&1)
status=$?
[ $status -eq 0 ] || fail "README's commands exited $status:
$(cat "$WORK/commands.sh")
--- output (last 30 lines):
$(echo "$out" | tail -n 30)"
[ -s "$WORK/run/run.svg" ] || fail "no run.svg after the first job's plot command"

# Every expected line, as an extended regex: `...` and node ids made
# wildcards, and in log lines (time-stamped: they vary from run to run) every
# number; everything else literal (`pstrain check`'s summary is exact). A line of `...` alone is skipped.
blocks text | while IFS= read -r line; do
  [ "$line" = "..." ] && continue
  [ -n "$line" ] || continue
  numbers='s/[0-9][0-9]*/@N@/g'
  case "$line" in '[20'*) ;; *) numbers='' ;; esac
  pattern=$(printf '%s\n' "$line" |
    sed -e 's/[0-9a-f]\{8\}-[0-9a-f]\{4\}-[0-9a-f]\{4\}-[0-9a-f]\{4\}-[0-9a-f]\{12\}/@ID@/g' \
      -e "$numbers" -e 's/[][\.*^$()+?{}|]/\\&/g' -e 's/\\\.\\\.\\\./.*/g' \
      -e 's/@N@/[0-9]+/g' -e 's/@ID@/[0-9a-f-]+/g')
  printf '%s\n' "$out" | grep -Eq -- "^$pattern\$" || {
    echo "FAIL: README shows a line the commands did not print:"
    echo "  $line"
    echo "--- output (last 30 lines):"
    printf '%s\n' "$out" | tail -n 30
    exit 1
  }
done || exit 1
echo "README's first job and own model ran as written ($(echo "$commands" | wc -l) lines)"
