#!/bin/sh
# Tests the cluster launchers: launch/k8s/pstrain-job.yaml parses and pins
# each pod's rank to its completion index, and launch/slurm/pstrain-srun.sh
# maps launcher ranks to roles and ranks, runs a real job on 127.0.0.1 (Slurm
# faked by setting SLURM_PROCID/SLURM_NTASKS per process) and rejects bad
# setups.
# Usage: sh tests/cluster_launchers_test.sh PATH/TO/pstrain   (dash or bash)

bin="${1:?usage: $0 PATH/TO/pstrain}"
[ -x "$bin" ] || { echo "not an executable: $bin" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
wrapper="$repo/launch/slurm/pstrain-srun.sh"
yaml_file="$repo/launch/k8s/pstrain-job.yaml"

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAILED: $*"; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

# Launcher variables from the caller (say, a test run inside a Slurm
# allocation) would change which rank each process takes.
unset SLURM_PROCID SLURM_NTASKS SLURM_JOB_NODELIST SLURM_NODELIST \
  OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE \
  MS_ROLE MS_NODE_ID MS_NODE_RANK MS_NODE_HOST MS_CLUSTER_TOKEN MS_SERVER_NUM MS_WORKER_NUM \
  MS_SCHED_HOST MS_SCHED_PORT PSTRAIN_NODE_PORT PSTRAIN_CONFIG \
  OMPI_COMM_WORLD_LOCAL_SIZE PMIX_NAMESPACE OMPI_MCA_ess_base_jobid PSTRAIN_SCHED_HOST_FILE
export PSTRAIN_BIN="$bin"

# Each pstrain ends by itself in about a second; timeout only guards a hang.
if command -v timeout > /dev/null 2>&1; then guard="timeout 60"; else guard=""; fi

# (a) The Kubernetes manifests are valid YAML with the expected objects.
if python3 -c "import yaml" > /dev/null 2>&1; then
  if python3 - "$yaml_file" "$repo/configs/lenet_fashion_mnist.yaml" > "$tmp/yaml.out" 2>&1 <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = sorted(d["kind"] for d in docs)
assert kinds == ["ConfigMap", "ConfigMap", "Job", "Job", "Job",
                 "PersistentVolumeClaim", "PersistentVolumeClaim", "Service"], kinds
svc = [d for d in docs if d["metadata"]["name"] == "pstrain-scheduler" and d["kind"] == "Service"]
assert svc and svc[0]["spec"]["clusterIP"] == "None", "pstrain-scheduler must be headless"
for d in docs:
    if d["kind"] == "Job":
        for c in d["spec"]["template"]["spec"]["containers"]:
            assert c["command"] == ["pstrain"], d["metadata"]["name"]
# Server and worker pods ask for their completion index as their rank; the
# $(VAR) it names must be defined before it, or Kubernetes leaves it as text.
for name, var in [("pstrain-server", "SERVER_INDEX"), ("pstrain-worker", "WORKER_INDEX")]:
    job = [d for d in docs if d["kind"] == "Job" and d["metadata"]["name"] == name][0]
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    names = [e["name"] for e in env]
    index = env[names.index(var)]["valueFrom"]["fieldRef"]["fieldPath"]
    assert "job-completion-index" in index, (name, index)
    rank = env[names.index("MS_NODE_RANK")]
    assert rank["value"] == "$(%s)" % var, (name, rank)
    assert names.index(var) < names.index("MS_NODE_RANK"), name
# Every pod: the versioned image, not pulled when present, requests, the
# config mounted where PSTRAIN_CONFIG points, the shared volume a
# ReadWriteMany claim; a config error (2) or a requested stop (3) fails the
# Job at once, so restartPolicy is Never (podFailurePolicy requires it).
by_name = {(d["kind"], d["metadata"]["name"]): d for d in docs}
env_map = by_name[("ConfigMap", "pstrain-env")]["data"]
assert by_name[("PersistentVolumeClaim", "pstrain-shared")]["spec"]["accessModes"] == ["ReadWriteMany"]
for d in docs:
    if d["kind"] != "Job":
        continue
    name = d["metadata"]["name"]
    pod = d["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never", name
    rules = d["spec"]["podFailurePolicy"]["rules"]
    assert any(r["action"] == "FailJob" and r["onExitCodes"]["operator"] == "In"
               and sorted(r["onExitCodes"]["values"]) == [2, 3] for r in rules), name
    c = pod["containers"][0]
    assert c["image"] == "pstrain:0.2.0" and c["imagePullPolicy"] == "IfNotPresent", name
    assert "cpu" in c["resources"]["requests"] and "memory" in c["resources"]["requests"], name
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    assert env_map["PSTRAIN_CONFIG"].startswith(mounts["config"] + "/"), name
    assert vols["config"]["configMap"]["name"] == "pstrain-config", name
    assert vols["shared"]["persistentVolumeClaim"]["claimName"] == "pstrain-shared", name
    assert env_map["PSTRAIN_LOG_DIR"].startswith(mounts["shared"]), name
# The config is the main job's (configs/lenet_fashion_mnist.yaml) with its
# checkpoints on the shared claim.
cfg = yaml.safe_load(by_name[("ConfigMap", "pstrain-config")]["data"][env_map["PSTRAIN_CONFIG"].rsplit("/", 1)[1]])
ckpt = cfg["train"].pop("checkpoint")
assert ckpt["dir"].startswith("/shared/"), ckpt
assert cfg == yaml.safe_load(open(sys.argv[2])), "pstrain-config differs from configs/lenet_fashion_mnist.yaml"
sched = [d for d in docs if d["kind"] == "Job" and d["metadata"]["name"] == "pstrain-scheduler"][0]
sched_env = sched["spec"]["template"]["spec"]["containers"][0]["env"]
assert "MS_NODE_RANK" not in [e["name"] for e in sched_env], "the scheduler takes no rank"
EOF
  then pass "k8s YAML parses"; else fail "k8s YAML: $(cat "$tmp/yaml.out")"; fi
else
  fail "no PyYAML (python3-yaml): the k8s YAML cannot be checked (tests/run.sh installs it)"
fi

# (b) Which role, rank and node id each launcher rank gets, seen by a
# stand-in binary: 1 + 2 servers + 2 workers, under srun and under mpirun.
fake="$tmp/fake-pstrain"
printf '#!/bin/sh\necho "$MS_ROLE ${MS_NODE_RANK-unset} $MS_NODE_ID"\n' > "$fake"
chmod +x "$fake"
for launcher in SLURM_PROCID:SLURM_NTASKS OMPI_COMM_WORLD_RANK:OMPI_COMM_WORLD_SIZE; do
  rank_var=${launcher%:*}
  size_var=${launcher#*:}
  for case in "0|MS_SCHED unset scheduler-0" "1|MS_PSERVER 0 server-0" "2|MS_PSERVER 1 server-1" \
              "3|MS_WORKER 0 worker-0" "4|MS_WORKER 1 worker-1"; do
    rank=${case%%|*}
    want=${case#*|}
    # A stray MS_NODE_RANK from the caller is replaced (or, for the scheduler, dropped).
    got=$(env "$rank_var=$rank" "$size_var=5" MS_SERVER_NUM=2 MS_SCHED_HOST=127.0.0.1 \
      MS_NODE_RANK=9 PSTRAIN_BIN="$fake" sh "$wrapper" 2> /dev/null)
    if [ "$got" = "$want" ]; then pass "$rank_var=$rank runs as '$want'"
    else fail "$rank_var=$rank runs as '$got', expected '$want'"
    fi
  done
done
got=$(SLURM_PROCID=3 SLURM_NTASKS=5 MS_SERVER_NUM=2 MS_SCHED_HOST=127.0.0.1 MS_NODE_ID=job \
  PSTRAIN_BIN="$fake" sh "$wrapper" 2> /dev/null)
if [ "$got" = "MS_WORKER 0 job-worker-0" ]; then pass "a given MS_NODE_ID becomes a prefix"
else fail "with MS_NODE_ID=job, SLURM_PROCID=3 runs as '$got'"
fi

# (b2) The scheduler host outside Slurm: MS_SCHED_HOST wins; a one-host
# Open MPI job uses 127.0.0.1; else rank 0 publishes its host in
# PSTRAIN_SCHED_HOST_FILE for this MPI job id only.
hostfake="$tmp/host-pstrain"
printf '#!/bin/sh\necho "$MS_SCHED_HOST"\n' > "$hostfake"
chmod +x "$hostfake"
mpi_host() {  # rank local_size [VAR=value...]: the scheduler host rank gets
  r="$1" l="$2"; shift 2
  env OMPI_COMM_WORLD_RANK="$r" OMPI_COMM_WORLD_SIZE=5 OMPI_COMM_WORLD_LOCAL_SIZE="$l" \
    PSTRAIN_BIN="$hostfake" PSTRAIN_CONNECT_TIMEOUT=2 "$@" sh "$wrapper" 2> "$tmp/err.log"
}
got=$(mpi_host 3 5 MS_SCHED_HOST=10.1.2.3)
[ "$got" = 10.1.2.3 ] && pass "mpirun: MS_SCHED_HOST wins" || fail "mpirun with MS_SCHED_HOST: '$got'"
got=$(mpi_host 3 5)
[ "$got" = 127.0.0.1 ] && pass "one-host mpirun: scheduler on 127.0.0.1" || fail "one-host mpirun: '$got'"
hf="$tmp/sched-host"
echo "old-job stale-host" > "$hf"
got=$(mpi_host 3 2 PMIX_NAMESPACE=job7 PSTRAIN_SCHED_HOST_FILE="$hf")
if [ -z "$got" ] && grep -q PSTRAIN_SCHED_HOST_FILE "$tmp/err.log"; then
  pass "a host file from another job is not taken (waits, then names the file)"
else fail "stale host file: got '$got': $(cat "$tmp/err.log")"
fi
got0=$(mpi_host 0 2 PMIX_NAMESPACE=job7 PSTRAIN_SCHED_HOST_FILE="$hf" MS_NODE_HOST=host-a)
got=$(mpi_host 3 2 PMIX_NAMESPACE=job7 PSTRAIN_SCHED_HOST_FILE="$hf")
if [ "$got0" = host-a ] && [ "$got" = host-a ]; then pass "multi-host mpirun: rank 0 publishes its host"
else fail "host file: rank 0 '$got0', rank 3 '$got'"
fi
mpi_host 3 2 > /dev/null
status=$?
if [ "$status" -eq 2 ] && grep -q "MS_SCHED_HOST" "$tmp/err.log"; then
  pass "multi-host mpirun without a host: exit 2 naming MS_SCHED_HOST"
else fail "multi-host mpirun without a host: exit $status: $(cat "$tmp/err.log")"
fi

# (c) A real job: rank 0 scheduler, rank 1 server, ranks 2-3 workers, on a
# tiny config (the wrapper's default trains LeNet for minutes).
. "$repo/tests/tiny_job.sh"
tiny=$(tiny_job "$bin" "$tmp/data") || fail "gen criteo"
# launch RANK PORT: one launcher rank, in the background; pid in $!.
launch() {
  SLURM_PROCID=$1 SLURM_NTASKS=4 MS_SERVER_NUM=1 MS_SCHED_HOST=127.0.0.1 MS_SCHED_PORT=$2 \
    PSTRAIN_CONFIG="$tiny" \
    PSTRAIN_CONNECT_TIMEOUT=20 $guard sh "$wrapper" > "$tmp/rank$1.log" 2>&1 &
}
# Rank 0, the scheduler, first: another test may hold the port it is given,
# so it is given another until it listens (at most 5 tries of 10 s).
attempt=0
while :; do
  port=$((20000 + ($$ * 7 + attempt * 131) % 30000))
  launch 0 "$port"
  sched=$!
  t=0
  until grep -qs "listens on" "$tmp/rank0.log" || ! kill -0 "$sched" 2> /dev/null || [ "$t" -ge 100 ]; do
    sleep 0.1
    t=$((t + 1))
  done
  grep -qs "listens on" "$tmp/rank0.log" && break
  kill "$sched" 2> /dev/null  # timeout hands the TERM on
  wait "$sched" 2> /dev/null
  attempt=$((attempt + 1))
  [ "$attempt" -lt 5 ] || { fail "the scheduler never listened: $(cat "$tmp/rank0.log")"; break; }
done
pids="$sched"
for rank in 1 2 3; do
  launch "$rank" "$port"
  pids="$pids $!"
done
rank=0
for pid in $pids; do
  wait "$pid"
  status=$?
  if [ "$status" -eq 0 ]; then pass "rank $rank exits 0"
  else fail "rank $rank exits $status; its log:"; cat "$tmp/rank$rank.log"
  fi
  rank=$((rank + 1))
done
sched_log="$tmp/rank0.log"
if grep -q "The server node id:server-0,.*assign rank id:0" "$sched_log"; then
  pass "scheduler gives server-0 rank 0"
else fail "no 'assign rank id:0' for server-0 in the scheduler's log:"; cat "$sched_log"
fi
# Each node's lines, once it has joined, carry the role and rank it joined as.
for rank in 2 3; do
  joined=$(sed -n 's/.* \[\(worker [0-9]*\)\] \[info\] worker rank \([0-9]*\) joined a job.*/\1=worker \2/p' \
    "$tmp/rank$rank.log")
  if [ -n "$joined" ] && [ "${joined%=*}" = "${joined#*=}" ]; then
    pass "launcher rank $rank labels its lines [${joined%=*}]"
  else fail "launcher rank $rank: no '[worker N] ... worker rank N joined' line:"; cat "$tmp/rank$rank.log"
  fi
done
if grep -q "Start the scheduler node is successful!" "$sched_log"; then
  pass "scheduler starts the job"
else fail "no 'Start the scheduler node is successful!' in the scheduler's log"
fi

# expect_usage_error NAME WORDS... : the last run exited 2 and its message
# ($tmp/err.log) names every WORD.
expect_usage_error() {
  name="$1"; shift
  if [ "$status" -ne 2 ]; then fail "$name: exit $status, expected 2"; return; fi
  for word in "$@"; do
    grep -q "$word" "$tmp/err.log" || { fail "$name: message lacks $word: $(cat "$tmp/err.log")"; return; }
  done
  pass "$name: exit 2 naming $*"
}

# (d) Bad setups are refused before pstrain starts.
SLURM_PROCID=0 SLURM_NTASKS=5 MS_SERVER_NUM=1 MS_WORKER_NUM=2 MS_SCHED_HOST=127.0.0.1 \
  $guard sh "$wrapper" > "$tmp/err.log" 2>&1
status=$?
expect_usage_error "world size mismatch" SLURM_NTASKS MS_SERVER_NUM MS_WORKER_NUM

MS_SCHED_HOST=127.0.0.1 $guard sh "$wrapper" > "$tmp/err.log" 2>&1
status=$?
expect_usage_error "no rank variable" SLURM_PROCID OMPI_COMM_WORLD_RANK PMI_RANK

SLURM_PROCID=0 SLURM_NTASKS=4 $guard sh "$wrapper" > "$tmp/err.log" 2>&1
status=$?
expect_usage_error "no scheduler host" MS_SCHED_HOST

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
