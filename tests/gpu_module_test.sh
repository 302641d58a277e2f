#!/bin/sh
# The CUDA module (libpstrain_cuda.so) is the only code that links CUDA:
# pstrain itself does not, --version and a CPU job never open it, and a job
# with model.device: gpu whose module cannot be opened fails at start in one
# line that names the file and why (missing, not a library, from another
# build). The module next to the executable comes before the build tree's.
# Usage: sh tests/gpu_module_test.sh PSTRAIN_BIN MODULE FAKE_MODULE
# (MODULE empty: a build without CUDA, which has nothing to check: skipped).
set -u
BIN="$1"
MODULE="${2:-}"
FAKE="${3:-}"
if [ -z "$MODULE" ]; then echo "skipped: this build has no CUDA module"; exit 77; fi
# Each case below says where the module is, or means the search.
unset PSTRAIN_GPU_MODULE
command -v ldd > /dev/null || { echo "skipped: no ldd"; exit 77; }
tmp=$(mktemp -d) || exit 1
# The messages name the module by its real path.
tmp=$(readlink -f "$tmp") FAKE=$(readlink -f "$FAKE")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAILED: $*"; }
cuda_libs='libcudart|libcublas|libnccl|libpstrain_cuda'

linked=$(ldd "$BIN" | grep -E -o "($cuda_libs)[^ ]*" | tr '\n' ' ')
[ -z "$linked" ] && pass "pstrain links no CUDA library" || fail "pstrain links $linked"
ldd "$MODULE" | grep -q libcudart && pass "the module links libcudart" ||
  fail "the module does not link libcudart: $(ldd "$MODULE" | head -n 3)"

# LD_DEBUG=files: the dynamic loader names every object it opens, dlopen too.
LD_DEBUG=files "$BIN" --version > "$tmp/version.out" 2>&1
opened=$(grep -E -o "file=[^ ]*($cuda_libs)[^ ]*" "$tmp/version.out" | head -n 1)
[ -z "$opened" ] && pass "--version opens no CUDA library" || fail "--version opens $opened"

. "$(dirname "$0")/tiny_job.sh"
cpu=$(tiny_job "$BIN" "$tmp/data") || { fail "gen criteo"; exit 1; }
LD_DEBUG=files "$BIN" local --config "$cpu" --servers 1 --workers 1 > "$tmp/cpu.out" 2>&1
status=$?
opened=$(grep -E -o "file=[^ ]*($cuda_libs)[^ ]*" "$tmp/cpu.out" | head -n 1)
if [ "$status" = 0 ] && [ -z "$opened" ]; then pass "a CPU job opens no CUDA library"
else fail "a CPU job exits $status, opens '$opened': $(grep -v '^ *[0-9]*:' "$tmp/cpu.out" | tail -n 3)"
fi

# The same job on the GPU: the module is opened when the job starts.
{ echo "model:"; echo "  device: gpu"; sed 1d "$cpu"; } > "$tmp/data/gpu.yaml"
# gpu_job NAME BIN [VAR=value]: runs it, output in $tmp/NAME.out, status in $status.
gpu_job() {
  out="$tmp/$1.out"; job_bin="$2"; shift 2
  env "$@" "$job_bin" local --config "$tmp/data/gpu.yaml" --servers 1 --workers 1 > "$out" 2>&1
  status=$?
}
# expect_error NAME TEXT: the job failed in one line that holds TEXT.
expect_error() {
  out="$tmp/$1.out"
  if [ "$status" != 0 ] && [ "$(wc -l < "$out")" = 1 ] && grep -q -F -e "$2" "$out"; then
    pass "$1: $(cat "$out")"
  else fail "$1: exit $status, expected one line with '$2': $(tail -n 3 "$out")"
  fi
}
gpu_job missing "$BIN" "PSTRAIN_GPU_MODULE=$tmp/none.so"
expect_error missing "model.device: gpu, but the GPU module could not be loaded: no file at PSTRAIN_GPU_MODULE=$tmp/none.so"
echo "not a library" > "$tmp/text.so"
gpu_job not_a_library "$BIN" "PSTRAIN_GPU_MODULE=$tmp/text.so"
expect_error not_a_library "the GPU module could not be loaded: $tmp/text.so: "
gpu_job other_build "$BIN" "PSTRAIN_GPU_MODULE=$FAKE"
expect_error other_build "the GPU module could not be loaded: $FAKE was built for another pstrain (pstrain 0.0.0, a test's stand-in; this is pstrain "
mkdir "$tmp/bin" && cp "$BIN" "$tmp/bin/pstrain" && cp "$tmp/text.so" "$tmp/bin/libpstrain_cuda.so"
gpu_job next_to_binary "$tmp/bin/pstrain"
expect_error next_to_binary "the GPU module could not be loaded: $tmp/bin/libpstrain_cuda.so: "
# The module itself: the job trains on a GPU, or says there is none.
gpu_job found "$BIN" "PSTRAIN_GPU_MODULE=$MODULE"
if grep -q "could not be loaded" "$tmp/found.out"; then fail "found: $(cat "$tmp/found.out")"
else pass "found: exit $status: $(tail -n 1 "$tmp/found.out")"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
