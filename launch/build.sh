#!/bin/sh
# Installs what pstrain's build and the main job need from Debian's packages
# (when missing) and builds it into build/. Usage: sh launch/build.sh
# Runs as root, or through sudo when it is available. The main job (README,
# "The two commands") reads Fashion-MNIST from dataset-fashion-mnist, so that
# is installed here too; tools only the tests use are installed by
# tests/run.sh (PSTRAIN_EXTRA_PACKAGES adds packages to the list).
set -eu
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
PACKAGES="cmake g++ make pkg-config libuv1-dev libflatbuffers-dev flatbuffers-compiler \
libeigen3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev doctest-dev zlib1g-dev libssl-dev \
libcli11-dev nlohmann-json3-dev librocksdb-dev dataset-fashion-mnist ${PSTRAIN_EXTRA_PACKAGES:-}"

missing=""
for p in $PACKAGES; do
  dpkg -s "$p" > /dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  echo "build.sh: installing$missing"
  $SUDO apt-get update
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $missing
fi

jobs=$(nproc 2> /dev/null || echo 2)
cmake -S "$REPO_DIR" -B "$REPO_DIR/build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$REPO_DIR/build" -j "$jobs"
