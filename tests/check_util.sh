# Sourced by the command-line tests (cli_test.sh, early_stopping_test.sh):
# a scratch output file and data folder, the tiny job (tests/tiny_job.sh)
# and check/has over the last command's output. POSIX sh (dash and bash).
#
# The caller sets BIN (the pstrain binary); afterwards OUT, DATA and TINY
# are set, and `passed`/`failed` count the checks.
OUT=$(mktemp)
DATA=$(mktemp -d)
trap 'rm -rf "$OUT" "$DATA"' EXIT
. "$(dirname "$0")/tiny_job.sh"
TINY=$(tiny_job "$BIN" "$DATA/tiny") || { echo "FAILED: gen criteo"; exit 1; }
passed=0
failed=0
# check DESCRIPTION COMMAND...: counts COMMAND's success; a failure says
# DESCRIPTION and shows the output.
check() {
  desc="$1"; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $desc"; cat "$OUT"; fi
}
# has PATTERN: the output has a line matching PATTERN.
has() { grep -q -e "$1" "$OUT"; }
