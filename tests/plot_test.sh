#!/bin/sh
# pstrain plot as a user meets it: metrics files of 2 workers and a server
# (worker 1 restarted, so its file holds two runs) become one well-formed SVG
# with a curve per worker in every panel (and the server's updates in one),
# only the last run drawn; long runs are downsampled; bad input exits 2 with
# one line naming file and line and leaves an existing plot alone. Checked
# with python3's xml.etree.
# Usage: sh tests/plot_test.sh PSTRAIN_BIN
set -u
BIN="$1"
command -v python3 > /dev/null || { echo "python3 missing: skipped"; exit 77; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
passed=0
failed=0
check() {
  desc="$1"; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $desc"; cat "$DIR/err"; fi
}

# gen KIND: metrics files in the schema of docs/formats.md, "Metrics files", in $DIR/KIND/.
gen() {
  mkdir -p "$DIR/$1"
  python3 - "$DIR/$1" "$1" <<'EOF'
import json, math, sys
out, kind = sys.argv[1], sys.argv[2]
def step(rank, s, t):
    return {"event": "step", "time": 1.7e9 + t, "elapsed_s": t, "role": "worker", "rank": rank,
            "step": s, "epoch": s // 50, "loss": 2.3 * math.exp(-s / 40) + 0.05 * rank, "lr": 0.01,
            "samples_per_s": 900 + 10 * rank, "compute_s": 0.01, "push_s": 0.002, "pull_s": 0.002,
            "allreduce_s": 0, "bytes_sent": 4096 * s, "bytes_received": 4096 * s,
            "cache_hit_rate": None}
def epoch(rank, s, t, acc, name="accuracy"):
    return {"event": "epoch", "time": 1.7e9 + t, "elapsed_s": t, "role": "worker", "rank": rank,
            "step": s, "epoch": s // 50, "samples_per_s": 900, "test_metric_name": name,
            "test_metric": acc}
def write(name, lines):
    with open(f"{out}/{name}", "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in lines)
if kind == "good":
    w0 = []
    for s in range(1, 101):
        w0.append(step(0, s, s * 0.05))
        if s % 50 == 0: w0.append(epoch(0, s, s * 0.05 + 0.01, 0.6 + s / 500))
    # Worker 1 ran to step 80, was killed, and resumed from step 40: 60 steps.
    w1 = [step(1, s, s * 0.05) for s in range(1, 81)]
    for s in range(41, 101):
        w1.append(step(1, s, (s - 40) * 0.05))
        if s % 50 == 0: w1.append(epoch(1, s, (s - 40) * 0.05 + 0.01, 0.62 + s / 500, "<b>acc&"))
    write("metrics-worker-0.jsonl", w0)
    write("metrics-worker-1.jsonl", w1)
    write("metrics-server-0.jsonl", [{"event": "server", "time": 1.7e9 + t, "elapsed_s": t,
          "role": "server", "rank": 0, "updates": 10 * t, "bytes_sent": 1, "bytes_received": 2,
          "rows": 0} for t in range(5)])
elif kind == "noepoch":
    write("metrics-worker-0.jsonl", [step(0, s, s * 0.1) for s in range(1, 30)])
elif kind == "long":
    write("metrics-worker-0.jsonl", [step(0, s, s * 0.01) for s in range(1, 50001)])
EOF
}

# svg FILE EXPECTATION...: parses FILE and checks, in python, what is asked.
svg() {
  python3 - "$@" <<'EOF' > "$DIR/err" 2>&1
import sys, xml.etree.ElementTree as ET
path, *asks = sys.argv[1:]
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(path).getroot()
assert root.tag == ns + "svg", root.tag
panels = {g.get("id"): g for g in root.iter(ns + "g") if g.get("class") == "panel"}
lines = {p.get("id"): p for p in root.iter(ns + "polyline")}
for ask in asks:
    what, _, arg = ask.partition("=")
    if what == "panel":
        assert arg in panels, f"no panel {arg}: {sorted(panels)}"
    elif what == "nopanel":
        assert arg not in panels, f"panel {arg} drawn"
    elif what == "series":  # panel/series id, inside that panel
        panel, sid = arg.split("/")
        ids = [p.get("id") for p in panels[panel].iter(ns + "polyline")]
        assert sid in ids, f"{sid} not in {panel}: {ids}"
    elif what == "points":  # series id:count
        sid, n = arg.split(":")
        got = len(lines[sid].get("points").split())
        assert got == int(n), f"{sid} has {got} points, not {n}"
    elif what == "maxpoints":
        sid, n = arg.split(":")
        got = len(lines[sid].get("points").split())
        assert 100 < got <= int(n), f"{sid} has {got} points"
    elif what == "text":
        texts = [t.text or "" for t in root.iter(ns + "text")]
        assert any(arg in t for t in texts), f"no text {arg!r}"
    elif what == "noscript":
        assert not [e for e in root.iter() if e.tag.endswith("script")], "a script element"
EOF
}

# --- a good run ---
gen good
"$BIN" plot "$DIR"/good/metrics-*.jsonl --out "$DIR/run.svg" > "$DIR/err" 2>&1
check "plot of 2 workers and a server exits 0" [ $? -eq 0 ]
set --
for p in loss-step loss-time metric-step throughput-step throughput-time; do
  set -- "$@" "panel=$p" "series=$p/$p-worker-0" "series=$p/$p-worker-1"
done
check "every panel has a curve per worker" svg "$DIR/run.svg" "$@" "text=worker 0" "text=worker 1"
check "the server's updates have a panel" svg "$DIR/run.svg" \
  "series=server-updates-time/server-updates-time-server-0" points=server-updates-time-server-0:5 \
  "text=2 workers, 1 server"
check "only the last run of a restarted worker is drawn" \
  svg "$DIR/run.svg" points=loss-step-worker-0:100 points=loss-step-worker-1:60 \
  points=metric-step-worker-1:2
check "the test metric is named, and hostile text stays text" \
  svg "$DIR/run.svg" "text=Test accuracy" noscript
check "no temp file is left beside the plot" [ "$(ls "$DIR" | grep -c tmp)" -eq 0 ]

# --- no epoch ended: no test metric panel ---
gen noepoch
"$BIN" plot "$DIR"/noepoch/*.jsonl --out "$DIR/noepoch.svg" > "$DIR/err" 2>&1
check "a run with no epoch end plots" [ $? -eq 0 ]
check "and has no test metric panel" svg "$DIR/noepoch.svg" panel=loss-step nopanel=metric-step

# --- 50,000 steps are downsampled ---
gen long
"$BIN" plot "$DIR"/long/*.jsonl --out "$DIR/long.svg" > "$DIR/err" 2>&1
check "a long run plots" [ $? -eq 0 ]
check "its curves are downsampled" svg "$DIR/long.svg" maxpoints=loss-step-worker-0:2000
check "and the file stays small" [ "$(wc -c < "$DIR/long.svg")" -lt 400000 ]

# --- bad input: exit 2, one line naming file and line, old plot kept ---
cp "$DIR/run.svg" "$DIR/keep.svg"
good_line=$(head -n 1 "$DIR/good/metrics-worker-0.jsonl")
# bad NAME LINE3 EXPECT: a file whose third line is LINE3 must be refused.
bad() {
  { echo "$good_line"; echo "$good_line"; printf '%s\n' "$2"; } > "$DIR/$1"
  "$BIN" plot "$DIR/$1" --out "$DIR/keep.svg" > /dev/null 2> "$DIR/err"
  rc=$?
  check "$1: exit 2 (got $rc)" [ $rc -eq 2 ]
  check "$1: one line" [ "$(wc -l < "$DIR/err")" -eq 1 ]
  check "$1: names file and line, and says $3" grep -q "$1:3: .*$3" "$DIR/err"
  check "$1: the old plot is kept" cmp -s "$DIR/keep.svg" "$DIR/run.svg"
}
step_with() { echo "$good_line" | sed "s/$1/$2/"; }
bad malformed.jsonl '{"event":"step",' "not valid JSON"
bad missing.jsonl "$(step_with '"loss": [0-9.e-]*, ' '')" '"loss" is missing'
bad type.jsonl "$(step_with '"step": 1,' '"step": "ten",')" '"step" is not a number'
bad nan.jsonl "$(step_with '"loss": [0-9.e-]*' '"loss": NaN')" "not valid JSON"
bad inf.jsonl "$(step_with '"loss": [0-9.e-]*' '"loss": 1e999')" "not valid JSON: number overflow"
bad array.jsonl '[1, 2, 3]' "not a JSON object"
bad rank.jsonl "$(step_with '"rank": 0' '"rank": 1')" "worker 1 line"
bad long.jsonl "$(python3 -c 'print("{\"x\":\"" + "a" * 100000 + "\"}")')" "longer than"

for path in "$DIR/absent.jsonl" "$DIR/good"; do
  "$BIN" plot "$path" --out "$DIR/x.svg" > /dev/null 2> "$DIR/err"
  rc=$?
  check "unreadable $path: exit 2 (got $rc)" [ $rc -eq 2 ]
  check "unreadable $path: one line naming it" grep -q "$path" "$DIR/err"
done
"$BIN" plot "$DIR/good/metrics-worker-0.jsonl" --out "$DIR/x.pdf" > /dev/null 2> "$DIR/err"
check "--out of an unknown kind: exit 2" [ $? -eq 2 ]
"$BIN" plot "$DIR/good/metrics-server-0.jsonl" --out "$DIR/x.svg" > /dev/null 2> "$DIR/err"
check "only server files: exit 2, nothing to draw" [ $? -eq 2 ]

# PNG through rsvg-convert where it is installed; a clear refusal where not.
"$BIN" plot "$DIR"/good/*.jsonl --out "$DIR/run.png" > "$DIR/err" 2>&1
rc=$?
if command -v rsvg-convert > /dev/null; then
  check "--out x.png with rsvg-convert: exit 0 (got $rc)" [ $rc -eq 0 ]
  check "and the file is a PNG" [ "$(head -c 4 "$DIR/run.png" | tail -c 3)" = "PNG" ]
else
  echo "rsvg-convert missing: PNG output not rendered"
fi
env PATH=/nonexistent "$BIN" plot "$DIR"/good/*.jsonl --out "$DIR/none.png" > /dev/null 2> "$DIR/err"
check "--out x.png without rsvg-convert: exit 1" [ $? -eq 1 ]
check "and one line naming the package" grep -q librsvg2-bin "$DIR/err"
check "and no file, no temp file" [ "$(ls "$DIR" | grep -c 'none\|tmp')" -eq 0 ]

# A running node may be half-way through its last line: drawn without it.
cp "$DIR/good/metrics-worker-0.jsonl" "$DIR/live.jsonl"
printf '%s' '{"event":"step","time":1' >> "$DIR/live.jsonl"
"$BIN" plot "$DIR/live.jsonl" --out "$DIR/live.svg" > "$DIR/err" 2>&1
check "a half-written last line is skipped" [ $? -eq 0 ]
check "and every whole line is drawn" svg "$DIR/live.svg" points=loss-step-worker-0:100

echo "plot_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
