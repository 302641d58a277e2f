#!/bin/sh
# cmake --install into a temporary prefix gives a working installation: the
# installed pstrain answers --help and, in a CUDA build, opens the installed
# GPU module; the installed launch scripts, with no
# checkout build and no pstrain on PATH, find <prefix>/bin/pstrain and run a
# job of 2 servers and 2 workers on 127.0.0.1 (every process exits 0).
# Usage: sh tests/install_test.sh BUILD_DIR
set -u
build="${1:?usage: $0 BUILD_DIR}"
tmp=$(mktemp -d) || exit 1
trap 'kill $(cat "$tmp"/logs/*.pid 2> /dev/null) 2> /dev/null; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAILED: $*"; }

prefix="$tmp/prefix"
if cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1; then
  pass "cmake --install --prefix $prefix"
else
  fail "cmake --install: $(tail -n 3 "$tmp/install.log")"
  echo "$passed passed, $failed failed"; exit 1
fi
for f in bin/pstrain share/pstrain/launch/Scheduler.sh share/pstrain/launch/defaults.sh \
         share/pstrain/launch/slurm/pstrain-srun.sh share/pstrain/launch/k8s/pstrain-job.yaml \
         share/pstrain/configs/lenet_fashion_mnist.yaml share/doc/pstrain/LICENSE; do
  [ -e "$prefix/$f" ] && pass "installs $f" || fail "no $f in the install"
done
if "$prefix/bin/pstrain" --help > "$tmp/help.out" 2>&1 && grep -q "Usage" "$tmp/help.out"; then
  pass "installed pstrain --help"
else fail "installed pstrain --help: $(head -n 3 "$tmp/help.out")"
fi

# The installed scripts, run from another directory with a PATH that has no
# pstrain, so only <prefix>/bin/pstrain can be found.
unset PSTRAIN_BIN MS_ROLE MS_NODE_ID MS_NODE_RANK MS_NODE_HOST MS_CLUSTER_TOKEN PSTRAIN_CONFIG
export PATH=/usr/bin:/bin PSTRAIN_LOG_DIR="$tmp/logs" MS_SCHED_HOST=127.0.0.1
export PSTRAIN_CONNECT_TIMEOUT=20
# A tiny job (the default config, share/pstrain/configs/lenet_fashion_mnist.yaml,
# trains for minutes).
. "$(dirname "$0")/tiny_job.sh"
PSTRAIN_CONFIG=$(tiny_job "$prefix/bin/pstrain" "$tmp/data") || fail "gen criteo"
export PSTRAIN_CONFIG
# A CUDA build installs its module, and the installed pstrain opens that
# one, not the build tree's, for a job with model.device: gpu (which then
# runs, or says that no GPU is visible).
if [ -e "$build/src/gpu/libpstrain_cuda.so" ]; then
  module=$(find "$prefix" -name libpstrain_cuda.so | head -n 1)
  [ -n "$module" ] && pass "installs $module" || fail "no libpstrain_cuda.so in the install"
  { echo "model:"; echo "  device: gpu"; sed 1d "$PSTRAIN_CONFIG"; } > "${PSTRAIN_CONFIG%/*}/gpu.yaml"
  LD_DEBUG=files "$prefix/bin/pstrain" local --config "${PSTRAIN_CONFIG%/*}/gpu.yaml" --servers 1 --workers 1 \
    > "$tmp/gpu.out" 2>&1
  if [ -n "$module" ] && grep -q "file=$module " "$tmp/gpu.out"; then
    pass "the installed pstrain opens the installed module"
  else fail "the installed pstrain did not open ${module:-its module}: $(grep -v '^ *[0-9]*:' "$tmp/gpu.out" | tail -n 2)"
  fi
fi
launch="$prefix/share/pstrain/launch"
# The scheduler's port is below Linux's ephemeral range (32768 and up, where
# another process's outgoing connection could hold it); should another test
# hold it anyway, the job is started again on another.
for attempt in 0 1 2 3; do
  export MS_SCHED_PORT=$((10000 + ($$ * 7 + attempt * 131) % 22000))
  rm -rf "$tmp/logs"
  (cd "$tmp" && sh "$launch/Scheduler.sh" && sh "$launch/Server.sh" && sh "$launch/Worker.sh") \
    > "$tmp/launch.out" 2>&1
  n=0  # at most 10 s for the scheduler to listen or fail
  until grep -q "listens on\|address already in use" "$tmp/logs/scheduler.log" 2> /dev/null ||
    [ "$n" -ge 100 ]; do
    sleep 0.1
    n=$((n + 1))
  done
  grep -q "address already in use" "$tmp/logs/scheduler.log" 2> /dev/null || break
  for name in scheduler server_0 server_1 worker_0 worker_1; do
    kill -9 "$(cat "$tmp/logs/$name.pid" 2> /dev/null)" 2> /dev/null
  done
  sleep 0.5
done
for name in scheduler server_0 server_1 worker_0 worker_1; do
  n=0  # at most 60 s for each to end
  while [ ! -s "$tmp/logs/$name.exit" ] && [ "$n" -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
  status=$(cat "$tmp/logs/$name.exit" 2> /dev/null || echo none)
  if [ "$status" = 0 ]; then pass "installed launch scripts: $name exits 0"
  else fail "installed launch scripts: $name exits $status: $(cat "$tmp/launch.out" "$tmp/logs/$name.log" 2> /dev/null | tail -n 5)"
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
