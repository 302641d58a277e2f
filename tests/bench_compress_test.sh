#!/bin/sh
# pstrain bench compress as a user runs it: --help names its flags; a small
# tensor gives one JSON line per density, each with every field, the format
# the density implies and a message no larger than its bound; a bad
# --densities is refused with exit 2. Speeds are printed, never asserted.
# Usage: sh tests/bench_compress_test.sh PSTRAIN_BIN
set -u
BIN="$1"
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
command -v python3 > /dev/null || { echo "skipped: no python3 to read the JSON"; exit 77; }
passed=0
failed=0
check() {
  desc="$1"; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $desc"; cat "$OUT"; fi
}

"$BIN" bench compress --help > "$OUT" 2>&1; status=$?
check "--help exits 0" [ "$status" = 0 ]
for flag in --elements --densities --repeats; do
  check "--help names $flag" grep -q -- "$flag" "$OUT"
done

"$BIN" bench compress --elements 20001 --repeats 2 > "$OUT" 2>&1; status=$?
check "a small tensor runs (got $status)" [ "$status" = 0 ]
check "every line is JSON with the fields, as the densities imply" python3 - "$OUT" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
fields = ["bench", "elements", "target_density", "density", "tau", "format", "message_bytes",
          "dense_bytes", "dense_over_message", "encode_GBps", "decode_GBps", "memory_GBps"]
targets = [1e-4, 1e-3, 1e-2, 1e-1, 0.5]
assert len(lines) == len(targets), f"{len(lines)} lines, expected {len(targets)}"
for line, target in zip(lines, targets):
    d = json.loads(line)
    missing = [f for f in fields if f not in d]
    assert not missing, f"missing {missing} in {line}"
    assert d["bench"] == "compress" and d["elements"] == 20001, line
    assert d["target_density"] == target, line
    # tau is the magnitude quantile: the density asked for, to one element.
    assert abs(d["density"] - target) <= 1.5 / 20001, line
    assert d["dense_bytes"] == 4 * 20001, line
    assert 16 < d["message_bytes"] <= 16 + (20001 + 3) // 4, line
    assert d["format"] == ("bitmap" if target == 0.5 else "sparse"), line
    assert abs(d["dense_over_message"] - d["dense_bytes"] / d["message_bytes"]) < 0.1, line
    assert d["encode_GBps"] > 0 and d["decode_GBps"] > 0 and d["memory_GBps"] > 0, line
PY

"$BIN" bench compress --elements 100 --densities 0.1,2 > "$OUT" 2>&1; status=$?
check "a density over 1 exits 2 (got $status)" [ "$status" = 2 ]
check "and says what --densities expects" grep -q "expected numbers in (0, 1]" "$OUT"

echo "bench_compress: $passed passed, $failed failed"
[ "$failed" = 0 ]
