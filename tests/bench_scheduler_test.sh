#!/bin/sh
# pstrain bench scheduler as a user runs it: --help names its flags; a small
# case starts a real scheduler process, prints one JSON line with every
# field, and each worker's Topology lists the servers and its two ring
# neighbours only; with --recover, the recovery of one lost worker sends
# the replacement its whole list and every other node only what changed
# (its two ring neighbours one entry each); --nodes 1 is refused with exit
# 2. Times are printed, never asserted.
# Usage: sh tests/bench_scheduler_test.sh PSTRAIN_BIN
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

"$BIN" bench scheduler --help > "$OUT" 2>&1; status=$?
check "--help exits 0" [ "$status" = 0 ]
for flag in --nodes --servers-every --loops --window --heartbeats --timeout --memory-mb \
  --recover --scheduler-bin; do
  check "--help names $flag" grep -q -- "$flag" "$OUT"
done

"$BIN" bench scheduler --nodes 40 --servers-every 8 --loops 2 --heartbeats 3 --timeout 60 \
  > "$OUT" 2>&1; status=$?
check "40 nodes run (got $status)" [ "$status" = 0 ]
check "one JSON line with every field; topologies by need" python3 - "$OUT" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.startswith("{")]
assert len(lines) == 1, lines
r = json.loads(lines[0])
fields = ["bench", "nodes", "servers", "workers", "loops", "register_s", "topology_s",
          "topology_bytes", "topology_max_entries", "heartbeats", "heartbeats_per_s",
          "shutdown_s", "sched_cpu_s", "sched_cpu_to_topology_s", "sched_rss_mb",
          "sched_rss_without_cuda_mb", "sched_peak_rss_mb", "connect_retries", "open_files"]
missing = [f for f in fields if f not in r]
assert not missing, missing
assert r["bench"] == "scheduler" and r["nodes"] == 40, r
assert r["servers"] == 5 and r["workers"] == 35, r
assert r["heartbeats"] == 120, r
# A worker's Topology: the 5 servers and its two ring neighbours; a server's: none.
assert r["topology_max_entries"] == 7, r
assert r["topology_bytes"] > 0 and r["sched_cpu_s"] > 0, r
PY

"$BIN" bench scheduler --nodes 40 --servers-every 8 --loops 2 --heartbeats 1 --timeout 60 \
  --recover > "$OUT" 2>&1; status=$?
check "40 nodes with a recovery run (got $status)" [ "$status" = 0 ]
check "a recovery sends only what changed" python3 - "$OUT" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.startswith("{")]
assert len(lines) == 1, lines
r = json.loads(lines[0])
# The replacement's whole list (5 servers, 2 neighbours), one entry to each
# of its neighbours, none to the other 37 nodes: 9 entries, not 35 x 7.
assert r["recovery_topology_entries"] == 9, r
assert r["recovery_topology_max_entries"] == 7, r
assert 0 < r["recovery_topology_bytes"] < r["topology_bytes"], r
PY

"$BIN" bench scheduler --nodes 1 > "$OUT" 2>&1; status=$?
check "--nodes 1 exits 2 (got $status)" [ "$status" = 2 ]
check "--nodes 1 says why" grep -q -- "--nodes must be at least 2" "$OUT"

echo "bench scheduler: $passed passed, $failed failed"
[ "$failed" = 0 ]
