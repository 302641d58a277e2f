#!/bin/sh
# launch/slurm/pstrain-srun.sh under a real Slurm: a one-node cluster on this
# machine (slurmctld + slurmd with a slurm.conf of their own in a temporary
# directory, no munge: auth/none), then `srun -n 5` runs the wrapper: a
# scheduler, 2 servers and 2 workers (the default shape). Every task must
# exit 0, and the scheduler must give both servers and both workers their
# ranks. Skips (77) without slurmctld/slurmd/srun, or when the daemons cannot
# start here (not root, say). Both daemons are stopped at the end.
# Usage: sh tests/slurm_srun_test.sh PATH/TO/pstrain
bin="${1:?usage: $0 PATH/TO/pstrain}"
repo=$(cd "$(dirname "$0")/.." && pwd)
for tool in slurmctld slurmd srun scontrol; do
  command -v "$tool" > /dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || { echo "skipped: no $tool"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "skipped: slurmd needs root"; exit 77; }
PATH="$PATH:/usr/sbin"

tmp=$(mktemp -d) || exit 1
chmod 755 "$tmp"
stop_daemons() {
  for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid"; do
    [ -s "$f" ] && kill "$(cat "$f")" 2> /dev/null
  done
  sleep 1
  for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid"; do
    [ -s "$f" ] && kill -9 "$(cat "$f")" 2> /dev/null
  done
}
trap 'stop_daemons; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

host=$(hostname -s)
base=$((10000 + ($$ * 7 + 5) % 20000))  # ports base..base+2, below the ephemeral range (32768 and up)
mkdir -p "$tmp/state" "$tmp/spool"
cat > "$tmp/slurm.conf" << CONF
ClusterName=pstraintest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$base
SlurmdPort=$((base + 1))
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
NodeName=pstrainnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=pstrainnode Default=YES MaxTime=10 State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$tmp/slurm.conf"
slurmctld -D -f "$SLURM_CONF" > "$tmp/slurmctld.out" 2>&1 &
slurmd -D -N pstrainnode -f "$SLURM_CONF" > "$tmp/slurmd.out" 2>&1 &
# The node is up once sinfo says idle (at most 30 s).
n=0
until sinfo -h -o %t 2> /dev/null | grep -q idle; do
  n=$((n + 1))
  if [ "$n" -gt 30 ]; then
    echo "skipped: the one-node Slurm did not come up here:"
    tail -n 5 "$tmp/slurmctld.log" "$tmp/slurmd.log" "$tmp/slurmctld.out" "$tmp/slurmd.out" 2> /dev/null
    exit 77
  fi
  sleep 1
done

unset MS_ROLE MS_NODE_ID MS_NODE_RANK MS_NODE_HOST MS_CLUSTER_TOKEN MS_SERVER_NUM MS_WORKER_NUM \
  MS_SCHED_HOST PSTRAIN_NODE_PORT PSTRAIN_CONFIG
export PSTRAIN_BIN="$bin" MS_SCHED_PORT=$((base + 2)) PSTRAIN_CONNECT_TIMEOUT=30
# A tiny job (the wrapper's default config trains LeNet for minutes).
. "$repo/tests/tiny_job.sh"
PSTRAIN_CONFIG=$(tiny_job "$bin" "$tmp/data") || { echo "FAILED: gen criteo"; exit 1; }
export PSTRAIN_CONFIG
# MS_SCHED_HOST comes from the allocation: its first node, whose Slurm name
# (pstrainnode) does not resolve, so the wrapper must dial its NodeAddr.
timeout 120 srun --overcommit -n 5 -t 2 -l sh "$repo/launch/slurm/pstrain-srun.sh" > "$tmp/srun.log" 2>&1
status=$?
grep -E "pstrain-srun.sh:|assign rank id|Start the scheduler" "$tmp/srun.log" | sort
failed=0
if [ "$status" -ne 0 ]; then failed=1; echo "FAILED: srun -n 5 exited $status"; tail -n 20 "$tmp/srun.log"; fi
for who in "server node id:server-0" "server node id:server-1" "worker node id:worker-0" "worker node id:worker-1"; do
  grep -q "The $who,.*assign rank id:" "$tmp/srun.log" || { failed=1; echo "FAILED: no '$who ... assign rank id' line"; }
done
[ "$failed" -eq 0 ] && echo "ok: srun -n 5 ran the 2x2 job, every task exited 0"
[ "$failed" -eq 0 ]
