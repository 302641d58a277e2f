#!/bin/sh
# Runs one process of a pstrain job under a resource manager that starts all
# of them at once and tells each its rank:
#   srun -n N sh launch/slurm/pstrain-srun.sh [pstrain flags]
#   mpirun -np N sh launch/slurm/pstrain-srun.sh [pstrain flags]
# Rank 0 is the scheduler, ranks 1..MS_SERVER_NUM the servers, the rest the
# workers, so N must be 1 + MS_SERVER_NUM + MS_WORKER_NUM. Each server and
# worker asks for its place in its role as its rank (MS_NODE_RANK): launcher
# rank 1 is server rank 0, launcher rank 1 + MS_SERVER_NUM worker rank 0.
# MS_SERVER_NUM defaults to launch/defaults.sh's (2, as launch/common.sh) and
# MS_WORKER_NUM to N - 1 - MS_SERVER_NUM, so N = 5 is the same 2x2 job.
# MS_SCHED_HOST, when not set: under Slurm the allocation's first host (where
# rank 0 runs with Slurm's usual task layout); under Open MPI 127.0.0.1 when
# every rank runs on this host, else the host rank 0 writes into
# PSTRAIN_SCHED_HOST_FILE (a path on storage every host sees). MS_SCHED_PORT
# defaults to 8081 (give each job its own port when jobs share hosts).
# PSTRAIN_CONFIG defaults to launch/defaults.sh's, as for the launch scripts.
# POSIX sh: runs under dash and bash.

me=$(basename "$0")
fail() { echo "$me: $*" >&2; exit 2; }

# The rank and the world size come from the same launcher. mpirun's own
# variables are read first: inside an sbatch allocation mpirun's processes
# also inherit SLURM_PROCID (0 for every process on the batch host), which
# would make them all schedulers.
if [ -n "${OMPI_COMM_WORLD_RANK:-}" ]; then rank_var=OMPI_COMM_WORLD_RANK size_var=OMPI_COMM_WORLD_SIZE
elif [ -n "${PMI_RANK:-}" ]; then rank_var=PMI_RANK size_var=PMI_SIZE
elif [ -n "${SLURM_PROCID:-}" ]; then rank_var=SLURM_PROCID size_var=SLURM_NTASKS
else fail "no rank: none of SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK is set (run me under srun or mpirun)"
fi
rank="" size=""
eval "rank=\${$rank_var}"
eval "size=\${$size_var:-}"

check_count() {  # name value
  case "$2" in
    ''|*[!0-9]*) fail "$1 is '$2': expected a whole number" ;;
  esac
}
check_count "$rank_var" "$rank"
check_count "$size_var" "$size"

# Job shape: the world size must hold exactly one scheduler, the servers and
# the workers, or some process would wait for a peer that never comes.
. "$(cd "$(dirname "$0")/.." && pwd)/defaults.sh"
servers="${MS_SERVER_NUM:-$PSTRAIN_DEFAULT_SERVERS}"
check_count MS_SERVER_NUM "$servers"
if [ -z "${MS_WORKER_NUM:-}" ] && [ "$size" -ge $((servers + 2)) ]; then
  MS_WORKER_NUM=$((size - 1 - servers))
fi
workers="${MS_WORKER_NUM:-}"
[ -z "$workers" ] || check_count MS_WORKER_NUM "$workers"
if [ -z "$workers" ] || [ "$size" -ne $((1 + servers + workers)) ]; then
  fail "world size $size_var=$size must equal 1 (scheduler) + MS_SERVER_NUM=$servers + MS_WORKER_NUM=${workers:-(at least 1)}"
fi
export MS_SERVER_NUM="$servers" MS_WORKER_NUM="$workers"

# Scheduler address: every rank must compute the same one.
# sched_host_from_file: rank 0 writes "<MPI job id> <its host>" into
# PSTRAIN_SCHED_HOST_FILE; the others wait (at most PSTRAIN_CONNECT_TIMEOUT s,
# default 60) for a line with their own job id, so a file an earlier job left
# behind is never taken for this job's.
sched_host_from_file() {
  file="$PSTRAIN_SCHED_HOST_FILE"
  job="${PMIX_NAMESPACE:-${OMPI_MCA_ess_base_jobid:-}}"
  [ -n "$job" ] || fail "PSTRAIN_SCHED_HOST_FILE needs Open MPI's job id (PMIX_NAMESPACE): set MS_SCHED_HOST instead"
  if [ "$rank" -eq 0 ]; then
    host="${MS_NODE_HOST:-$(hostname)}"
    echo "$job $host" > "$file.$$" && mv -f "$file.$$" "$file" || fail "cannot write PSTRAIN_SCHED_HOST_FILE='$file'"
    MS_SCHED_HOST="$host"
    return
  fi
  wait_s="${PSTRAIN_CONNECT_TIMEOUT:-60}"
  check_count PSTRAIN_CONNECT_TIMEOUT "$wait_s"
  waited=0
  while :; do
    line=$(cat "$file" 2> /dev/null || true)
    if [ "${line%% *}" = "$job" ]; then MS_SCHED_HOST="${line#* }"; return; fi
    [ "$waited" -lt "$wait_s" ] || fail "rank 0 did not write its host into PSTRAIN_SCHED_HOST_FILE='$file' within $wait_s s (is it on storage every host sees?)"
    sleep 1
    waited=$((waited + 1))
  done
}
if [ -z "${MS_SCHED_HOST:-}" ]; then
  nodelist="${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}}"
  if [ -n "$nodelist" ] && command -v scontrol > /dev/null 2>&1; then
    MS_SCHED_HOST=$(scontrol show hostnames "$nodelist" 2> /dev/null | head -n 1)
    # A Slurm node name need not resolve (NodeName=n1 NodeAddr=10.0.0.5):
    # dial the node's address as slurm.conf gives it, when scontrol tells.
    addr=$(scontrol show node -o "$MS_SCHED_HOST" 2> /dev/null | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
    [ -z "$addr" ] || MS_SCHED_HOST="$addr"
  elif [ -n "$nodelist" ]; then
    case "$nodelist" in *[[,]*) ;; *) MS_SCHED_HOST="$nodelist" ;; esac  # a single plain host name
  elif [ -n "${OMPI_COMM_WORLD_LOCAL_SIZE:-}" ] && [ "$OMPI_COMM_WORLD_LOCAL_SIZE" = "$size" ]; then
    MS_SCHED_HOST=127.0.0.1  # every rank, rank 0 included, runs on this host
  elif [ -n "${PSTRAIN_SCHED_HOST_FILE:-}" ]; then
    sched_host_from_file
  fi
  [ -n "${MS_SCHED_HOST:-}" ] || fail "MS_SCHED_HOST is not set and cannot be found (no Slurm node list '$nodelist' with scontrol, not a one-host Open MPI job, no PSTRAIN_SCHED_HOST_FILE): set MS_SCHED_HOST to the host of rank 0"
fi
export MS_SCHED_HOST
export MS_SCHED_PORT="${MS_SCHED_PORT:-$PSTRAIN_DEFAULT_SCHED_PORT}"

# The mapping is done here, once, rather than in pstrain, which reads no
# launcher's variables: pstrain only sees MS_ROLE and MS_NODE_RANK.
if [ "$rank" -eq 0 ]; then role=MS_SCHED word=scheduler index=0
elif [ "$rank" -le "$servers" ]; then role=MS_PSERVER word=server index=$((rank - 1))
else role=MS_WORKER word=worker index=$((rank - 1 - servers))
fi
export MS_ROLE="$role"
if [ "$role" = MS_SCHED ]; then unset MS_NODE_RANK; else export MS_NODE_RANK="$index"; fi
# A stable id per process, so a process the resource manager restarts gets its
# old rank back from the scheduler. A given MS_NODE_ID is shared by every
# process, so it becomes a prefix (as in launch/common.sh).
export MS_NODE_ID="${MS_NODE_ID:+$MS_NODE_ID-}$word-$index"

# The binary, found as launch/common.sh finds it, and the same default config
# (a --config among the flags below wins over it).
REPO_DIR=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO_DIR/launch/find_binary.sh"
export PSTRAIN_CONFIG="${PSTRAIN_CONFIG:-$REPO_DIR/$PSTRAIN_DEFAULT_CONFIG}"

echo "$me: $rank_var $rank of $size is $word${MS_NODE_RANK:+ $MS_NODE_RANK} (node id $MS_NODE_ID), scheduler $MS_SCHED_HOST:$MS_SCHED_PORT" >&2
# exec, so that srun/mpirun see pstrain's own exit status and signals.
exec "$PSTRAIN_BIN" "$@"
