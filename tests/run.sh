#!/bin/sh
# Installs what is needed, builds, and runs every test. Usage: sh tests/run.sh
# This is the README's test command; .ci/run calls it.
# Then the fuzzers (tests/fuzz/README.md): each harness for
# PSTRAIN_FUZZ_SECONDS (default 20) in its own clang build, build-fuzz/.
set -eu
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
# python3: tests/tools (comparing checkpoints in the chaos tests).
# clang, libclang-rt-14-dev: libFuzzer and the sanitizers (tests/fuzz).
PSTRAIN_EXTRA_PACKAGES="python3 clang libclang-rt-14-dev" sh "$REPO_DIR/launch/build.sh"
status=0
(cd "$REPO_DIR/build" && ctest --output-on-failure -j 2) || status=1
jobs=$(nproc 2> /dev/null || echo 2)
cmake -S "$REPO_DIR" -B "$REPO_DIR/build-fuzz" -DPSTRAIN_FUZZ=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER=clang++ -DPSTRAIN_FUZZ_SECONDS="${PSTRAIN_FUZZ_SECONDS:-20}"
cmake --build "$REPO_DIR/build-fuzz" -j "$jobs"
(cd "$REPO_DIR/build-fuzz" && ctest --output-on-failure -j 2) || status=1
exit $status
