#!/bin/bash
# GPU figures, for a machine with an NVIDIA GPU: builds pstrain,
# runs the GPU tests (which compare GPU steps with the CPU layers), trains
# configs/lenet_gpu.yaml (1 server, 1 GPU worker) and the CPU LeNet config
# (2 servers, 2 workers), runs `bench train` on lenet_gpu.yaml, and trains
# Wide&Deep on generated click data on the GPU and on the CPU (1 server, 1
# worker, 2 epochs). Logs go to OUT; the lines docs/benchmarks.md quotes are printed.
# Usage: bash tests/bench/gpu_bench.sh OUT [STAGES]
#   STAGES: comma-separated from build,test,train,bench,cpu,wd (default all).
# Environment: NCCL_ROOT where NCCL is not under /usr/local/cuda (e.g. PyTorch's
# site-packages/nvidia/nccl); BUILD (default /tmp/pstrain-gpu-build).
# The GPU figures in docs/hybrid.md and docs/benchmarks.md came from this on one H100 (an earlier form of it).
set -u
OUT=$1
STAGES=${2:-build,test,train,bench,cpu,wd}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
B=${BUILD:-/tmp/pstrain-gpu-build}
has() { [[ ",$STAGES," == *",$1,"* ]]; }
step() { echo; echo "=== $1 $(date -u +%T)"; }
mkdir -p "$OUT"
[ -n "${NCCL_ROOT:-}" ] && export LD_LIBRARY_PATH=$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}
if has build; then
  step build
  cmake -S "$REPO" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    ${NCCL_ROOT:+-DNCCL_ROOT=$NCCL_ROOT} > "$OUT/configure.log" 2>&1 || exit 1
  grep 'pstrain: CUDA' "$OUT/configure.log"
  cmake --build "$B" -j"$(nproc)" > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
fi
P=$B/src/app/pstrain
if has test; then
  step gpu-tests
  (cd "$B" && ctest -R '^gpu' --output-on-failure)
  (cd "$B/tests" && ./gpu_test --run-suite=gpu_device -tc='*throughput*' --no-skip | grep MESSAGE)
fi
if has train; then
  step train-gpu
  timeout 600 "$P" local --config "$REPO/configs/lenet_gpu.yaml" --servers 1 --workers 1 \
    > "$OUT/lenet_gpu.log" 2>&1
  echo "rc=$?"
  grep -E 'test accuracy|finished|copies' "$OUT/lenet_gpu.log" | tail -4
fi
if has bench; then
  step bench
  timeout 600 "$P" bench train --config "$REPO/configs/lenet_gpu.yaml" --servers 1,2 --workers 1,2
fi
if has cpu; then
  step train-cpu
  timeout 900 "$P" local --config "$REPO/configs/lenet_fashion_mnist.yaml" --servers 2 --workers 2 \
    > "$OUT/lenet_cpu.log" 2>&1
  echo "rc=$?"
  grep -E 'test accuracy|finished' "$OUT/lenet_cpu.log" | tail -4
fi
if has wd; then
  step wide-deep
  D=$(mktemp -d)
  mkdir -p "$D/configs"
  "$P" gen criteo --rows 1000000 --out "$D/data/criteo"
  sed -e 's/^  epochs: 6/  epochs: 2/' "$REPO/configs/wide_deep_criteo.yaml" > "$D/configs/wd_cpu.yaml"
  sed -e 's/^  loss: bce_with_logits/&\n  device: gpu/' "$D/configs/wd_cpu.yaml" > "$D/configs/wd_gpu.yaml"
  for d in gpu cpu; do
    timeout 900 "$P" local --config "$D/configs/wd_$d.yaml" --servers 1 --workers 1 \
      > "$OUT/wd_$d.log" 2>&1
    echo "wd $d rc=$?"
    grep -E 'test AUC|finished|copies' "$OUT/wd_$d.log" | tail -4
  done
  rm -rf "$D"
fi
