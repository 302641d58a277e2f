#!/bin/sh
# Runs one libFuzzer harness for a bounded time over its seed corpus; exits
# non-zero on any finding (crash, sanitizer report, timeout, out of memory).
# Usage: sh run_fuzzer.sh FUZZER SEED_CORPUS_DIR SECONDS
# A finding is saved as ./fuzz-artifacts/<fuzzer>-<kind>-<sha1> (the
# directory CTest runs in); tests/fuzz/README.md says how to replay it.
set -u
fuzzer=$1
seeds=$2
seconds=$3
name=$(basename "$fuzzer")
[ -d "$seeds" ] || { echo "$name: no seed corpus at $seeds"; exit 1; }

# New inputs go to a scratch corpus, never into the source tree.
work=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir -p fuzz-artifacts "$work/corpus"

# -timeout: one input running this long is a hang. -malloc_limit_mb: one
# allocation this large is a finding (no parser needs 512 MiB for inputs of
# a few KiB). error and timeout exit codes set to 1: libFuzzer's default 77
# would read as "skipped" to CTest.
# `timeout`: libFuzzer stops itself, but a process wedged while reporting
# must not outlive the test either.
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 \
  timeout -k 5 $((seconds + 60)) "$fuzzer" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=2048 -malloc_limit_mb=512 -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
  -artifact_prefix="fuzz-artifacts/$name-" "$work/corpus" "$seeds" > "$work/log" 2>&1
status=$?

# One line of figures: executions, speed, coverage (cov: is libFuzzer's
# count of covered code edges), corpus size.
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log")
rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$work/log")
last=$(grep -E '^#[0-9]+' "$work/log" | tail -n 1)
cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p')
echo "$name: ${seconds}s, ${runs:-?} runs, ${speed:-?} exec/s, cov: ${cov:-?} ft: ${ft:-?}," \
  "corpus ${corp:-?}, peak RSS ${rss:-?} MB, exit $status"
if [ "$status" != 0 ]; then
  echo "$name: FINDING; the fuzzer's last 80 lines:"
  tail -n 80 "$work/log"
  sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$work/log" | while read -r f; do
    echo "$name: input saved as $(pwd)/$f; replay: $fuzzer $(pwd)/$f"
  done
  exit 1
fi
exit 0
