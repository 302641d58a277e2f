#!/bin/sh
# Installs what is needed, builds, and runs every test. Usage: sh tests/run.sh
# This is the README's test command; .ci/run calls it.
set -eu
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
# python3: tests/tools (comparing checkpoints in the chaos tests).
PSTRAIN_EXTRA_PACKAGES="python3" sh "$REPO_DIR/launch/build.sh"
cd "$REPO_DIR/build"
ctest --output-on-failure -j 2
