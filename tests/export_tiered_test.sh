#!/bin/sh
# pstrain export and eval of checkpoints whose tables are partly on the
# servers' disks, on `pstrain gen criteo` data made here:
#   1. Wide&Deep (2 servers, 2 workers) trained with every row in memory and
#      again with server_cache_rows: 100 (most rows on disk): the two
#      exports are the same arrays, byte for byte, read back with numpy;
#   2. eval of the tiered checkpoint prints the AUC line training ended with;
#      export and eval leave the checkpoint as it was and their scratch
#      directory (under TMPDIR) removed;
#   3. a damaged store file: export and eval fail with one line naming it,
#      exit 1, no output file, no scratch directory left.
# usage: export_tiered_test.sh PSTRAIN
BIN=$1
[ -x "$BIN" ] || { echo "usage: $0 PSTRAIN"; exit 2; }
WORK=$(mktemp -d) && [ -d "$WORK" ] || exit 1
. "$(dirname "$0")/cluster_util.sh"
trap '[ -n "$KEEP" ] || rm -rf "$WORK"' EXIT
PY=
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import numpy' 2> /dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "skipped: no python3 with numpy (apt-get install python3-numpy)"; exit 77; }
BUDGET=100
# Export and eval make their scratch directory here; it must end empty.
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR" "$WORK/store"

"$BIN" gen criteo --rows 4000 --shards 2 --test-rows 1000 --out "$WORK/criteo" \
  > "$WORK/gen.out" 2>&1 || fail "gen criteo"
job_config wide_deep "$WORK/criteo" 2 "$WORK/mem-ckpt" > "$WORK/mem.yaml"
sed -i "s|^  train: \[$WORK/criteo/train.txt\]|&\n  test: [$WORK/criteo/test.txt]|" "$WORK/mem.yaml"
grep -q "test:" "$WORK/mem.yaml" || fail "no test set in mem.yaml"
sed -e "s|init_in_server: true,|init_in_server: true, server_cache_rows: $BUDGET,|" \
  -e "s|$WORK/mem-ckpt|$WORK/tier-ckpt|" "$WORK/mem.yaml" > "$WORK/tier.yaml"
echo "  store_dir: $WORK/store" >> "$WORK/tier.yaml"
[ "$(grep -c "server_cache_rows: $BUDGET" "$WORK/tier.yaml")" = 2 ] || fail "tier.yaml: no budget"

for job in mem tier; do
  timeout 120 "$BIN" local --config "$WORK/$job.yaml" --servers 2 --workers 2 \
    > "$WORK/$job.log" 2>&1 || fail "training $job"
done
grep -q "table rows beyond their memory budget go to" "$WORK/tier.log" || fail "tier: no disk tier"
step=$(ls -d "$WORK"/tier-ckpt/step-* | tail -n 1)
ls "$step"/server-0-store/*.sst > /dev/null 2>&1 || fail "no store checkpoint in $step"

# 1. The same arrays, byte for byte; far more rows than the servers' memory.
fingerprint() { find "$WORK/tier-ckpt" -type f | sort | xargs md5sum; }
before=$(fingerprint)
for job in mem tier; do
  timeout 120 "$BIN" export --checkpoint "$WORK/$job-ckpt" --out "$WORK/$job.npz" \
    > "$WORK/$job.export" 2>&1 || fail "$job: export: $(cat "$WORK/$job.export")"
  cat "$WORK/$job.export"
done
"$PY" - "$WORK/mem.npz" "$WORK/tier.npz" $((2 * BUDGET)) << 'EOF' || fail "the exports differ"
import sys
import numpy as np
a, b, resident = np.load(sys.argv[1]), np.load(sys.argv[2]), int(sys.argv[3])
if sorted(a.files) != sorted(b.files):
    sys.exit("arrays %s and %s" % (sorted(a.files), sorted(b.files)))
for name in sorted(a.files):
    x, y = a[name], b[name]
    if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
        sys.exit("%s differs: %s %s and %s %s" % (name, x.dtype, x.shape, y.dtype, y.shape))
for name in sorted(f for f in a.files if f.endswith(".ids")):
    ids, rows = b[name], b[name[:-4] + ".rows"]
    if ids.dtype != np.int64 or rows.dtype != np.float32 or rows.shape[0] != ids.size:
        sys.exit("%s: %s %s, rows %s %s" % (name, ids.dtype, ids.shape, rows.dtype, rows.shape))
    if not (np.diff(ids) > 0).all() or ids.size < 10 * resident:
        sys.exit("%s: %d ids, not ascending, or not 10x the %d rows in memory" % (name, ids.size, resident))
    print("%s: %d rows, identical (the servers' memory held %d)" % (name[:-4], ids.size, resident))
print("the exports are identical: %d arrays" % len(a.files))
EOF

# 2. Eval of the tiered checkpoint: the metric training ended with.
trained=$(grep "test AUC" "$WORK/tier.log" | tail -n 1 | sed 's/.*test /test /')
[ -n "$trained" ] || fail "tier: no test metric in the training log"
timeout 120 "$BIN" eval --config "$WORK/tier.yaml" --checkpoint "$WORK/tier-ckpt" \
  > "$WORK/tier.eval" 2>&1 || fail "tier: eval: $(cat "$WORK/tier.eval")"
evaluated=$(sed 's/.*test /test /' "$WORK/tier.eval")
[ "$trained" = "$evaluated" ] || fail "tier: training ended with '$trained', eval says '$evaluated'"
echo "eval of the tiered checkpoint matches training: $evaluated"
[ "$before" = "$(fingerprint)" ] || fail "export or eval changed the checkpoint"
[ -z "$(ls -A "$TMPDIR")" ] || fail "scratch left in TMPDIR: $(ls -A "$TMPDIR")"

# 3. One flipped byte in server 1's store, found after server 0's store was
# restored into scratch (a copy: the file is hard-linked to the store and the
# older steps).
sst=$(ls "$step"/server-1-store/*.sst | tail -n 1)
cp "$sst" "$WORK/copy.sst" && rm "$sst" && mv "$WORK/copy.sst" "$sst" || fail "copy $sst"
size=$(stat -c %s "$sst")
printf '\377' | dd of="$sst" bs=1 seek=$((size / 2)) conv=notrunc 2> /dev/null
damaged_checkpoint_fails "$WORK/tier-ckpt" "$WORK/tier.yaml" "a damaged store" \
  "$(basename "$sst"): checksum mismatch"
[ -z "$(ls -A "$TMPDIR")" ] || fail "scratch left in TMPDIR after an error: $(ls -A "$TMPDIR")"
echo "export_tiered: ok"
