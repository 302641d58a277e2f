#!/bin/sh
# Metrics files, the ETA on step lines and the progress bar.
# `pstrain local` trains Wide&Deep on generated click data (2 servers, 2
# workers, 2 epochs, a test set) with PSTRAIN_LOG_DIR set. Checked:
#   - every line of every metrics-<role>-<rank>.jsonl parses as JSON and
#     carries the contract's keys; worker step lines come every log_every
#     steps and at the last, the last one at the steps the job ran; epoch
#     lines carry the AUC the log shows (worker 0) or null (worker 1);
#     servers wrote lines that count the workers' updates;
#   - a second run appends to the same files;
#   - the log's step lines keep their prefix and gain samples/s and an ETA;
#   - no \r on stdout when it is not a terminal;
#   - under a pseudo-terminal (util-linux `script`) the bar is drawn and
#     reaches 100%, and every log line printed over it starts cleanly.
# Usage: sh tests/metrics_test.sh PSTRAIN_BIN
set -u
BIN="$1"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/cluster_util.sh"
command -v python3 > /dev/null || { echo "skipped: python3 is not installed"; exit 77; }

"$BIN" gen criteo --rows 2048 --shards 2 --test-rows 512 --out "$WORK/data" > "$WORK/gen.out" 2>&1 ||
  fail "gen criteo"
TEST_FILE=$(ls "$WORK"/data/test* 2> /dev/null | head -n 1)
[ -n "$TEST_FILE" ] || fail "gen criteo wrote no test file: $(ls "$WORK/data")"
LOG_EVERY=10
job_config wide_deep "$WORK/data" 2 - |
  sed -e "s|^  train: \[$WORK/data/train.txt\]|&\n  test: [$TEST_FILE]|" \
      -e "s/log_every: 1000/log_every: $LOG_EVERY/" > "$WORK/job.yaml"
grep -q "^  test:" "$WORK/job.yaml" || fail "no test: line in the config"

LOGS="$WORK/logs/nested"  # missing: the node makes it
run_job() {
  PSTRAIN_LOG_DIR="$LOGS" timeout 120 "$BIN" local --config "$WORK/job.yaml" --servers 2 \
    --workers 2 > "$WORK/$1.out" 2> "$WORK/$1.log" || fail "run $1 failed"
}
run_job first
for f in worker-0 worker-1 server-0 server-1; do
  [ -s "$LOGS/metrics-$f.jsonl" ] || fail "no $LOGS/metrics-$f.jsonl: $(ls "$LOGS" 2>&1)"
done
wc -l "$LOGS"/*.jsonl | sed 's/^/  /'

python3 - "$LOGS" "$WORK/first.log" "$LOG_EVERY" 1 << 'PY' || fail "metrics files"
import json, math, os, re, sys
logs, log_path, log_every, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
log = open(log_path).read()
m = re.search(r"worker 0 trains (\d+) steps", log)
assert m, "no 'worker 0 trains N steps' line in the log"
total = int(m.group(1))
aucs = [float(a) for a in re.findall(r"epoch: \d+ test AUC: ([0-9.]+)", log)]
step_keys = ["event", "time", "elapsed_s", "role", "rank", "step", "epoch", "loss", "lr",
             "samples_per_s", "compute_s", "push_s", "pull_s", "allreduce_s", "bytes_sent",
             "bytes_received", "cache_hit_rate"]
def read(name):
    lines = []
    for n, text in enumerate(open(os.path.join(logs, name)), 1):
        try:
            lines.append(json.loads(text))
        except ValueError as e:
            raise AssertionError(f"{name}:{n}: not JSON ({e}): {text[:120]!r}")
    return lines
expected = [s for s in range(1, total + 1) if s % log_every == 0 or s == total]
for rank in (0, 1):
    lines = read(f"metrics-worker-{rank}.jsonl")
    steps = [l for l in lines if l["event"] == "step"]
    epochs = [l for l in lines if l["event"] == "epoch"]
    for l in steps:
        missing = [k for k in step_keys if k not in l]
        assert not missing, f"worker {rank} step line lacks {missing}: {l}"
        assert l["role"] == "worker" and l["rank"] == rank, l
        assert l["samples_per_s"] > 0 and l["compute_s"] > 0, l
        assert l["bytes_sent"] > 0 and l["bytes_received"] > 0, l
        assert l["cache_hit_rate"] is None, "sync mode has no cache: " + str(l)
    got = [l["step"] for l in steps]
    assert got == expected * runs, f"worker {rank}: steps {got}, expected {expected} x {runs}"
    print(f"  worker {rank}: {len(steps)} step lines, last step {got[-1]} of {total}; "
          f"loss {steps[0]['loss']:.4f} -> {steps[-1]['loss']:.4f}")
    assert [l["epoch"] for l in epochs] == [1, 2] * runs, f"worker {rank}: epochs {epochs}"
    for l in epochs:
        if rank == 0:
            assert l["test_metric_name"] == "auc", l
        else:
            assert l["test_metric_name"] is None and l["test_metric"] is None, l
    if rank == 0:
        logged = aucs[-2:]
        written = [l["test_metric"] for l in epochs[-2:]]
        assert len(logged) == 2 and all(abs(a - b) < 6e-5 for a, b in zip(logged, written)), \
            f"AUC in the log {logged}, in the metrics {written}"
        print(f"  worker 0 epoch AUCs {written} match the log {logged}")
for rank in (0, 1):
    lines = read(f"metrics-server-{rank}.jsonl")
    for l in lines:
        for k in ("event", "time", "elapsed_s", "role", "rank", "updates", "bytes_sent",
                  "bytes_received", "rows"):
            assert k in l, f"server {rank} line lacks {k}: {l}"
        assert l["event"] == "server" and l["role"] == "server" and l["rank"] == rank, l
    last = lines[-1]
    assert last["updates"] > 0 and last["bytes_received"] > 0 and last["rows"] > 0, last
    print(f"  server {rank}: {len(lines)} lines, last {last['updates']} updates, "
          f"{last['rows']} rows")
PY

# The step log lines keep their prefix and gain samples/s and an ETA.
grep -q "epoch: 1 step: 1, loss is [0-9.]*, [0-9]* samples/s, ETA [0-9dhms?]*$" "$WORK/first.log" ||
  fail "no step line with samples/s and ETA"
grep "loss is" "$WORK/first.log" | tail -n 1 | sed 's/^/  /'
# stdout is a file here: not one carriage return.
if tr -d -c '\r' < "$WORK/first.out" | grep -q .; then fail "\\r on stdout without a terminal"; fi

# A second run appends: twice the lines, the first run's still at the top.
head -n 1 "$LOGS/metrics-worker-0.jsonl" > "$WORK/head_before"
run_job second
head -n 1 "$LOGS/metrics-worker-0.jsonl" | cmp -s - "$WORK/head_before" ||
  fail "the second run rewrote the metrics file"
python3 - "$LOGS" "$WORK/second.log" "$LOG_EVERY" 2 << 'PY' > /dev/null || fail "appended metrics"
import json, sys, os, re
logs, log_every = sys.argv[1], int(sys.argv[3])
total = int(re.search(r"worker 0 trains (\d+) steps", open(sys.argv[2]).read()).group(1))
steps = [json.loads(t)["step"] for t in open(os.path.join(logs, "metrics-worker-0.jsonl"))
         if json.loads(t)["event"] == "step"]
expected = [s for s in range(1, total + 1) if s % log_every == 0 or s == total]
assert steps == expected * 2, steps
PY
echo "  second run appended to the same files"

# Under a pseudo-terminal: the bar.
if ! script -q -e -c true /dev/null > /dev/null 2>&1; then
  echo "ok (bar not checked: util-linux script cannot make a pseudo-terminal here)"
  exit 0
fi
PSTRAIN_LOG_DIR="$WORK/tty-logs" timeout 120 script -q -e -c \
  "'$BIN' local --config '$WORK/job.yaml' --servers 2 --workers 2" /dev/null \
  > "$WORK/tty.out" 2>&1 < /dev/null || fail "the run under a pseudo-terminal failed"
python3 - "$WORK/tty.out" << 'PY' || fail "progress bar"
import re, sys
text = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
bars = re.findall(r"\[[#-]{20}\] +(\d+)% (\d+)/(\d+) \d+ samples/s ETA \S+", text)
assert bars, "no progress bar under a terminal"
assert bars[-1][0] == "100" and bars[-1][1] == bars[-1][2], f"last bar {bars[-1]}"
for line in text.split("\n"):
    if "loss is" in line:
        # The pty ends lines with \r\n; the terminal keeps what follows the last \r.
        shown = line.rstrip("\r").split("\r")[-1]
        assert shown.startswith("["), f"log line garbled by the bar: {line!r}"
        assert not re.match(r"\[[#-]{20}\]", shown), f"log line after the bar: {line!r}"
print(f"  {len(bars)} bars drawn, the last at {bars[-1][1]}/{bars[-1][2]} (100%)")
PY
echo "ok"
