#!/bin/sh
# Installs what is needed, builds, and runs every test. Usage: sh tests/run.sh
# This is the README's test command; .ci/run calls it.
# Then the fuzzers (tests/fuzz/README.md): each harness for
# PSTRAIN_FUZZ_SECONDS (default 15) in its own clang build, build-fuzz/.
set -eu
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
# Tools only the tests use (launch/build.sh installs the build's and the main
# job's packages):
# python3: tests/tools (comparing checkpoints in the chaos tests).
# python3-yaml: the k8s manifest checks; python3-numpy: reading exports back.
# clang-format: the format test. curl: the HTTP status page test.
# clang, libclang-rt-14-dev: libFuzzer and the sanitizers (tests/fuzz).
# slurmd, slurmctld, slurm-client, openmpi-bin: pstrain-srun.sh under a
# one-node Slurm and under mpirun (about 95 MB, 30 s to install).
# prometheus: promtool checks the scheduler's /metrics page (live_view).
# iproute2: network namespaces, hosts of their own for the multi-host tests.
# openssh-server, openssh-client: pstrain launch over real ssh (launch_ssh).
PSTRAIN_EXTRA_PACKAGES="python3 python3-yaml python3-numpy clang-format curl clang libclang-rt-14-dev \
slurmd slurmctld slurm-client openmpi-bin prometheus iproute2 openssh-server openssh-client" \
  sh "$REPO_DIR/launch/build.sh"
# The k8s manifest test checks against kubernetes-models, from npm's registry:
# fetched into build/node_modules where npm is there and the registry answers
# (31 small packages, seconds); otherwise that test is skipped, not failed.
# Debian's npm only where no npm is on PATH (a nodejs from elsewhere, e.g.
# NodeSource, carries its own and conflicts with Debian's).
if ! command -v npm > /dev/null 2>&1; then
  PSTRAIN_EXTRA_PACKAGES=npm sh "$REPO_DIR/launch/build.sh" > /dev/null 2>&1 ||
    echo "run.sh: could not install npm: k8s_manifest will skip"
fi
if command -v npm > /dev/null 2>&1 && [ ! -d "$REPO_DIR/build/node_modules/kubernetes-models" ]; then
  timeout 120 npm install --prefix "$REPO_DIR/build" --no-save --no-audit --no-fund \
    kubernetes-models@4.5.1 > /dev/null 2>&1 || echo "run.sh: npm install kubernetes-models failed: k8s_manifest will skip"
fi
status=0
(cd "$REPO_DIR/build" && ctest --output-on-failure -j 2) || status=1
jobs=$(nproc 2> /dev/null || echo 2)
cmake -S "$REPO_DIR" -B "$REPO_DIR/build-fuzz" -DPSTRAIN_FUZZ=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER=clang++ -DPSTRAIN_FUZZ_SECONDS="${PSTRAIN_FUZZ_SECONDS:-15}"
cmake --build "$REPO_DIR/build-fuzz" -j "$jobs"
(cd "$REPO_DIR/build-fuzz" && ctest --output-on-failure -j 2) || status=1
exit $status
