#!/bin/bash
# GPU figures, for a machine with an NVIDIA GPU: the GPU tests (GPU steps
# against the CPU layers, NCCL with a world of one), configs/lenet_gpu.yaml
# trained (1 server, 1 GPU worker), `bench train` on it, Wide&Deep on 1M
# generated click rows on the GPU and on the CPU (1 server, 1 worker, sync),
# `bench train` on that Wide&Deep config, two GPU workers on one GPU (NCCL
# with two ranks), and the CPU LeNet config (2 servers, 2 workers). With
# BASELINE, the Wide&Deep GPU runs and their bench alternate with another
# build's pstrain: a before/after side by side, on one machine, in one run.
# Logs go to OUT; the lines docs/benchmarks.md quotes are printed.
# Usage: bash tests/bench/gpu_bench.sh OUT [STAGES]
#   STAGES: comma-separated from build,test,train,bench,wd,wdbench,nccl2,cpu
#   (default: all; without build when PSTRAIN is set).
# Environment:
#   PSTRAIN, GPU_TEST  prebuilt pstrain and gpu_test (each with its
#                      libpstrain_cuda.so beside it), e.g. built elsewhere and
#                      carried to a GPU machine that cannot build; otherwise
#                      stage build makes them in BUILD (default /tmp/pstrain-gpu-build)
#   BASELINE           another build's pstrain (its module beside it)
#   REPO               the checkout whose configs are used (default this one)
#   WD_EPOCHS          Wide&Deep epochs (default 2); LENET_EPOCHS: LeNet's
#                      (default the configs' 12)
#   WD_DIR             where the Wide&Deep data is made, or found made (default
#                      a temporary folder)
#   NCCL_ROOT          where NCCL is not under /usr/local/cuda (e.g. PyTorch's
#                      site-packages/nvidia/nccl)
# The GPU figures in docs/hybrid.md and docs/benchmarks.md came from this:
# prebuilt binaries, BASELINE the build before the change they compare.
set -u
OUT=$1
REPO=${REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
B=${BUILD:-/tmp/pstrain-gpu-build}
if [ -n "${PSTRAIN:-}" ]; then
  STAGES=${2:-test,train,bench,wd,wdbench,nccl2,cpu}
  P=$PSTRAIN
else
  STAGES=${2:-build,test,train,bench,wd,wdbench,nccl2,cpu}
  P=$B/src/app/pstrain
fi
T=${GPU_TEST:-$B/tests/gpu_test}
WD_EPOCHS=${WD_EPOCHS:-2}
has() { [[ ",$STAGES," == *",$1,"* ]]; }
step() { echo; echo "=== $1 $(date -u +%T)"; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# Metrics files and checkpoints of the runs stay out of the checkout.
RUNS=$(mktemp -d)
trap 'rm -rf "$RUNS"' EXIT
export PSTRAIN_LOG_DIR=$RUNS
[ -n "${NCCL_ROOT:-}" ] && export LD_LIBRARY_PATH=$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}
# A config with its epochs changed (LeNet: LENET_EPOCHS), in RUNS.
epochs() {
  local from=$1 n=$2 to=$RUNS/$(basename "$1")
  sed -e "s/^  epochs: [0-9]*/  epochs: $n/" "$from" > "$to"
  echo "$to"
}
lenet() {
  [ -n "${LENET_EPOCHS:-}" ] || { echo "$REPO/configs/$1"; return; }
  # Absolute data paths: the copy may live anywhere.
  epochs "$REPO/configs/$1" "$LENET_EPOCHS"
}
if has build; then
  step build
  cmake -S "$REPO" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    ${NCCL_ROOT:+-DNCCL_ROOT=$NCCL_ROOT} > "$OUT/configure.log" 2>&1 || exit 1
  grep 'pstrain: CUDA' "$OUT/configure.log"
  cmake --build "$B" -j"$(nproc)" > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
fi
if has test; then
  step gpu-tests
  for suite in "" gpu_device gpu_nccl; do
    (cd "$(dirname "$T")" && timeout 300 "$T" ${suite:+--run-suite=$suite} \
      > "$OUT/gpu_test_${suite:-plain}.log" 2>&1)
    echo "gpu_test ${suite:-(no suite)} rc=$?"
    grep -E 'MESSAGE|ERROR|test cases' -A1 "$OUT/gpu_test_${suite:-plain}.log" | tail -12
  done
  (cd "$(dirname "$T")" &&
    timeout 120 "$T" --run-suite=gpu_device -tc='*throughput*' --no-skip | grep -A1 MESSAGE)
fi
if has train; then
  step train-gpu
  timeout 600 "$P" local --config "$(lenet lenet_gpu.yaml)" --servers 1 --workers 1 \
    > "$OUT/lenet_gpu.log" 2>&1
  echo "rc=$?"
  grep -E 'test accuracy|finished|copies' "$OUT/lenet_gpu.log" | tail -4
fi
if has bench; then
  step bench
  timeout 600 "$P" bench train --config "$REPO/configs/lenet_gpu.yaml" --servers 1,2 --workers 1,2
fi
# Wide&Deep: data and configs in WD (relative paths, as the shipped config).
WD=${WD_DIR:-$RUNS/wd}
wd_setup() {
  [ -d "$WD/data" ] && return
  mkdir -p "$WD/configs"
  "$P" gen criteo --rows 1000000 --out "$WD/data/criteo" > /dev/null || exit 1
  sed -e "s/^  epochs: 6/  epochs: $WD_EPOCHS/" "$REPO/configs/wide_deep_criteo.yaml" \
    > "$WD/configs/wd_cpu.yaml"
  sed -e 's/^  loss: bce_with_logits/&\n  device: gpu/' "$WD/configs/wd_cpu.yaml" \
    > "$WD/configs/wd_gpu.yaml"
}
# builds: "new" (P) and, with BASELINE, "base", alternating.
BUILDS="new"
[ -n "${BASELINE:-}" ] && BUILDS="new base"
bin() { [ "$1" = base ] && echo "$BASELINE" || echo "$P"; }
if has wd; then
  step wide-deep
  wd_setup
  rounds=1
  [ -n "${BASELINE:-}" ] && rounds=2
  for r in $(seq 1 $rounds); do
    for b in $BUILDS; do
      timeout 900 "$(bin $b)" local --config "$WD/configs/wd_gpu.yaml" --servers 1 --workers 1 \
        > "$OUT/wd_gpu_${b}_$r.log" 2>&1
      echo "wd gpu $b round $r rc=$?"
      grep -E 'test AUC|finished|copies' "$OUT/wd_gpu_${b}_$r.log" | tail -4
    done
  done
  timeout 900 "$P" local --config "$WD/configs/wd_cpu.yaml" --servers 1 --workers 1 \
    > "$OUT/wd_cpu.log" 2>&1
  echo "wd cpu rc=$?"
  grep -E 'test AUC|finished' "$OUT/wd_cpu.log" | tail -3
fi
if has wdbench; then
  step wide-deep-bench
  wd_setup
  for b in $BUILDS; do
    echo "$b:"
    timeout 600 "$(bin $b)" bench train --config "$WD/configs/wd_gpu.yaml" --servers 1 --workers 1
  done
fi
if has nccl2; then
  # Two GPU workers average fc* with NCCL. On one GPU both ranks get the
  # same device, which NCCL refuses: this shows the calls and the message.
  step nccl-two-ranks
  W2=$RUNS/wd2
  mkdir -p "$W2/configs"
  "$P" gen criteo --rows 100000 --shards 2 --out "$W2/data/criteo" > /dev/null || exit 1
  sed -e 's/^  log_every: 200/  steps: 50\n  log_every: 10/' -e 's/^  loss: bce_with_logits/&\n  device: gpu/' \
    "$REPO/configs/wide_deep_criteo.yaml" > "$W2/configs/wd_gpu2.yaml"
  timeout 120 "$P" local --config "$W2/configs/wd_gpu2.yaml" --servers 1 --workers 2 \
    > "$OUT/wd_gpu_2workers.log" 2>&1
  echo "rc=$?"
  grep -iE 'nccl|finished|error|pstrain:' "$OUT/wd_gpu_2workers.log" | tail -6
fi
if has cpu; then
  step train-cpu
  timeout 900 "$P" local --config "$(lenet lenet_fashion_mnist.yaml)" --servers 2 --workers 2 \
    > "$OUT/lenet_cpu.log" 2>&1
  echo "rc=$?"
  grep -E 'test accuracy|finished' "$OUT/lenet_cpu.log" | tail -4
fi
