#!/bin/sh
# pstrain launch over a real OpenSSH server, across hosts: six network
# namespaces (tests/tools/netns_cluster.sh), five of them running sshd with
# a key made for this run. From the sixth, `pstrain launch --hostfile`
# starts the scheduler, 2 servers and 2 workers, each on its own host:
#   1. the job ends with exit 0, each node's lines prefixed with its host,
#      role and rank, and each node registered from its own host's address;
#   2. Ctrl-C to the launcher stops the job on every host (exit 3) and
#      leaves no pstrain process on any;
#   3. a host whose sshd does not answer ends the launch (exit 1, naming
#      it) and nothing is left running on the others.
# Teardown leaves no namespace, link or process (checked).
# Needs root and sshd (Debian's openssh-server); skipped (77) otherwise.
# Usage: sh tests/launch_ssh_test.sh PSTRAIN_BIN
set -u
TESTS=$(cd "$(dirname "$0")" && pwd)
. "$TESTS/tools/netns_cluster.sh"
. "$TESTS/tiny_job.sh"
WORK=$(mktemp -d)
cleanup() {
  netns_teardown || echo "FAIL: teardown left something behind"
  rm -rf "$WORK"
}
trap cleanup EXIT
trap "exit 1" HUP INT TERM
fail() {
  echo "FAIL: $*"
  [ -f "$WORK/out" ] && tail -40 "$WORK/out"
  exit 1
}
SSHD=/usr/sbin/sshd
[ -x "$SSHD" ] || { echo "skipped: no $SSHD (openssh-server)"; exit 77; }
command -v ssh > /dev/null || { echo "skipped: no ssh (openssh-client)"; exit 77; }
command -v ssh-keygen > /dev/null || { echo "skipped: no ssh-keygen"; exit 77; }
BIN="$WORK/pstrain"
cp "$1" "$BIN"

HOSTS="sched s0 s1 w0 w1"
netns_setup ctl $HOSTS
ssh-keygen -q -t ed25519 -N '' -f "$WORK/host_key" || fail "ssh-keygen"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/id" || fail "ssh-keygen"
cp "$WORK/id.pub" "$WORK/authorized_keys"
mkdir -p /run/sshd  # sshd's privilege separation folder
for h in $HOSTS; do
  cat > "$WORK/sshd_$h" << CONF
ListenAddress $(netns_addr "$h")
HostKey $WORK/host_key
AuthorizedKeysFile $WORK/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $WORK/sshd_$h.pid
CONF
  netns_bg "$h" "$SSHD" -D -e -f "$WORK/sshd_$h" 2> "$WORK/sshd_$h.log"
done
cat > "$WORK/ssh_config" << CONF
Host *
  User root
  IdentityFile $WORK/id
  IdentitiesOnly yes
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  BatchMode yes
  ConnectTimeout 5
  LogLevel ERROR
CONF
SSH="ssh -F $WORK/ssh_config"
# sshd takes a moment to listen: each host answers within 10 s.
for h in $HOSTS; do
  i=0
  until netns_exec ctl $SSH "$(netns_addr "$h")" true 2> "$WORK/ssh_err"; do
    i=$((i + 1))
    [ $i -lt 50 ] || fail "ssh to $h: $(cat "$WORK/ssh_err"; cat "$WORK/sshd_$h.log")"
    sleep 0.2
  done
done

config=$(tiny_job "$BIN" "$WORK/data") || fail "tiny_job"
sed -i "s#\[train.txt-00000\]#[$WORK/data/train.txt-00000]#; s#\[test.txt\]#[$WORK/data/test.txt]#" \
  "$config"
{
  echo "$(netns_addr sched) workers=0"
  echo "$(netns_addr s0) servers=1 workers=0"
  echo "$(netns_addr s1) servers=1 workers=0"
  echo "$(netns_addr w0) workers=1"
  echo "$(netns_addr w1) workers=1"
} > "$WORK/hosts"
unset MS_SCHED_HOST MS_SERVER_NUM MS_WORKER_NUM MS_ROLE PSTRAIN_CONFIG MS_NODE_HOST
export MS_SCHED_PORT=7070 PSTRAIN_HEARTBEAT_INTERVAL=0.2 PSTRAIN_HEARTBEAT_TIMEOUT=5
export MS_CLUSTER_TOKEN=ssh-launch-$$

# 1. The job, one node per host.
netns_exec ctl "$BIN" launch --hostfile "$WORK/hosts" --config "$config" --ssh "$SSH" \
  --grace-s 5 > "$WORK/out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "the job exited $rc, expected 0"
grep -q "^\[$(netns_addr sched) scheduler\] .*Start the scheduler node is successful!" "$WORK/out" ||
  fail "no prefixed scheduler line"
for node in "s0 server 0" "s1 server 1" "w0 worker 0" "w1 worker 1"; do
  set -- $node
  addr=$(netns_addr "$1")
  grep -q "^\[$addr $2 $3\] " "$WORK/out" || fail "no line of $2 $3 from $addr"
  grep -q "The $2 node id:[^,]*,node ip: $addr,.*assign rank id:$3" "$WORK/out" ||
    fail "$2 $3 did not register from its host's address $addr"
done
echo "ok: 2 servers and 2 workers on four hosts over ssh: exit 0"

# 2. Ctrl-C stops the job on every host.
sed 's/steps: 4/steps: 1000000/' "$config" > "$WORK/long.yaml"
netns_bg ctl "$BIN" launch --hostfile "$WORK/hosts" --config "$WORK/long.yaml" --ssh "$SSH" \
  --grace-s 5 > "$WORK/out" 2>&1
pid=$NETNS_PID
i=0
until grep -q "worker 1\] .*step" "$WORK/out" 2> /dev/null || [ $i -ge 300 ]; do
  sleep 0.1
  i=$((i + 1))
done
kill -INT "$pid"
i=0
while kill -0 "$pid" 2> /dev/null && [ $i -lt 600 ]; do
  sleep 0.1
  i=$((i + 1))
done
kill -0 "$pid" 2> /dev/null && fail "the launcher still runs 60 s after Ctrl-C"
wait "$pid"
rc=$?
[ "$rc" = 3 ] || fail "Ctrl-C: exit $rc, expected 3"
sleep 1
left=$(pgrep -af "$BIN" | grep -v "$BIN launch")
[ -z "$left" ] || fail "nodes left running after Ctrl-C: $left"
echo "ok: Ctrl-C over ssh stopped every node, exit 3"

# 3. A host that does not answer ssh: exit 1 naming it, nothing left.
kill "$(cat "$WORK/sshd_w1.pid")"
netns_exec ctl "$BIN" launch --hostfile "$WORK/hosts" --config "$WORK/long.yaml" --ssh "$SSH" \
  --grace-s 5 > "$WORK/out" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "an unreachable host: exit $rc, expected 1"
grep -q "pstrain launch: $(netns_addr w1) (worker 1): ssh failed (exit 255)" "$WORK/out" ||
  fail "the unreachable host is not named"
sleep 1
left=$(pgrep -af "$BIN")
[ -z "$left" ] || fail "nodes left running after a failed host: $left"
echo "ok: a host without sshd ends the launch, exit 1, nothing left running"
exit 0
