#!/bin/sh
# launch/slurm/pstrain-srun.sh under Open MPI's mpirun, outside Slurm: with
# no MS_SCHED_HOST the wrapper finds that every rank runs on this host and
# puts the scheduler on 127.0.0.1; `mpirun -np 5` runs the default 2x2 job
# and every rank must exit 0. Then MS_SCHED_HOST given (as on several hosts)
# must be used. Skips (77) without mpirun.
# Usage: sh tests/mpirun_test.sh PATH/TO/pstrain
bin="${1:?usage: $0 PATH/TO/pstrain}"
repo=$(cd "$(dirname "$0")/.." && pwd)
command -v mpirun > /dev/null 2>&1 || { echo "skipped: no mpirun"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
unset MS_ROLE MS_NODE_ID MS_NODE_RANK MS_NODE_HOST MS_CLUSTER_TOKEN MS_SERVER_NUM MS_WORKER_NUM \
  MS_SCHED_HOST PSTRAIN_NODE_PORT PSTRAIN_CONFIG SLURM_JOB_NODELIST SLURM_NODELIST SLURM_PROCID \
  PSTRAIN_SCHED_HOST_FILE
export PSTRAIN_BIN="$bin" PSTRAIN_CONNECT_TIMEOUT=30
# A tiny job (the wrapper's default config trains LeNet for minutes).
. "$repo/tests/tiny_job.sh"
PSTRAIN_CONFIG=$(tiny_job "$bin" "$tmp/data") || { echo "FAILED: gen criteo"; exit 1; }
export PSTRAIN_CONFIG
# Open MPI refuses root without these; --oversubscribe: 5 ranks on fewer cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Below Linux's ephemeral range (32768 and up), where another process's
# outgoing connection could hold it; another test may still hold one: run()
# tries the next port then.
port=$((10000 + ($$ * 7 + 3) % 22000))
failed=0
run() {  # NAME [VAR=value...]: mpirun -np 5 the wrapper; its output in $tmp/NAME.log
  name="$1"; shift
  for attempt in 1 2 3 4 5; do
    env MS_SCHED_PORT="$port" "$@" timeout 120 mpirun --oversubscribe --tag-output -np 5 \
      sh "$repo/launch/slurm/pstrain-srun.sh" > "$tmp/$name.log" 2>&1
    status=$?
    grep -q "listen on .*: address already in use" "$tmp/$name.log" || break
    port=$((port + 131))
  done
  grep -E "pstrain-srun.sh:" "$tmp/$name.log" | sort
  if [ "$status" -ne 0 ]; then failed=1; echo "FAILED: $name: mpirun exited $status"; tail -n 20 "$tmp/$name.log"; return; fi
  n=$(grep -c "node id:.*assign rank id:" "$tmp/$name.log")
  if [ "$n" -eq 4 ]; then echo "ok: $name: every rank exited 0, 2 servers and 2 workers got ranks"
  else failed=1; echo "FAILED: $name: $n of 4 nodes were given ranks"; fi
  port=$((port + 1))
}
run one-host
grep -q "scheduler 127.0.0.1:" "$tmp/one-host.log" || { failed=1; echo "FAILED: one-host: the scheduler is not on 127.0.0.1"; }
run given-host MS_SCHED_HOST=localhost
grep -q "scheduler localhost:" "$tmp/given-host.log" || { failed=1; echo "FAILED: given-host: MS_SCHED_HOST=localhost not used"; }
[ "$failed" -eq 0 ]
