#!/bin/sh
# pstrain launch on this machine, with a stand-in for ssh that runs the
# remote command here (tests/tools/local_ssh.sh): the plan, the payload, the
# prefixed lines, the exit status, Ctrl-C and a failed host, without sshd.
# The same launcher over a real OpenSSH server across network namespaces is
# tests/launch_ssh_test.sh.
# Usage: sh tests/launch_cmd_test.sh PSTRAIN_BIN
set -u
TESTS=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
# A copy of the binary of our own: pgrep finds this test's nodes and no others.
BIN="$WORK/pstrain"
cp "$1" "$BIN"
cleanup() {
  pkill -KILL -f "$BIN" 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap "exit 1" HUP INT TERM
. "$TESTS/tiny_job.sh"
fail() {
  echo "FAIL: $*"
  [ -f "$WORK/out" ] && tail -30 "$WORK/out"
  exit 1
}
SSH="sh $TESTS/tools/local_ssh.sh"
# A port free now (the system's pick), for the scheduler.
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
unset MS_SCHED_HOST MS_SERVER_NUM MS_WORKER_NUM MS_ROLE PSTRAIN_CONFIG
export MS_SCHED_PORT=$PORT PSTRAIN_HEARTBEAT_INTERVAL=0.2 PSTRAIN_HEARTBEAT_TIMEOUT=5

config=$(tiny_job "$BIN" "$WORK/data") || fail "tiny_job"
# launch ships the config's text: its paths must be absolute.
sed -i "s#\[train.txt-00000\]#[$WORK/data/train.txt-00000]#; s#\[test.txt\]#[$WORK/data/test.txt]#" \
  "$config"
launch() { "$BIN" launch --ssh "$SSH" --grace-s 5 "$@"; }

# 1. A job of 1 server and 2 workers over two "hosts" ends as the job does,
# every line prefixed with the node's host, role and rank.
printf '# two hosts\n127.0.0.1 servers=1 workers=1\nlocalhost  workers=1 # the second\n' > "$WORK/hosts"
launch --hostfile "$WORK/hosts" --config "$config" > "$WORK/out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "the job exited $rc, expected 0"
grep -q '^\[127.0.0.1 scheduler\] .*Start the scheduler node is successful!' "$WORK/out" ||
  fail "no prefixed scheduler line"
grep -q '^\[127.0.0.1 server 0\] ' "$WORK/out" || fail "no line of server 0"
grep -q '^\[127.0.0.1 worker 0\] ' "$WORK/out" || fail "no line of worker 0"
grep -q '^\[localhost worker 1\] ' "$WORK/out" || fail "no line of worker 1 on the second host"
grep -q 'The worker node id:.*assign rank id:1' "$WORK/out" || fail "worker 1's rank line"
[ -z "$(ls /tmp/pstrain-launch.* 2> /dev/null | head -1)" ] ||
  echo "note: /tmp holds pstrain-launch folders (another run's?)"
echo "ok: a job over two hosts exited 0 with prefixed lines"

# 2. The secret stays off command lines: MS_CLUSTER_TOKEN reaches the nodes
# (they authenticate) through stdin, never through ssh's arguments.
export MS_CLUSTER_TOKEN=launch-secret-$$
printf '127.0.0.1 servers=1 workers=1\n' > "$WORK/one"
LOCAL_SSH_ARGS_LOG="$WORK/ssh_args" launch --hostfile "$WORK/one" --config "$config" > "$WORK/out" 2>&1 ||
  fail "the job with a token exited $?"
grep -q "launch-secret" "$WORK/ssh_args" && fail "the token appears in ssh's arguments"
unset MS_CLUSTER_TOKEN
echo "ok: MS_CLUSTER_TOKEN went over stdin"

# 3. A host ssh cannot reach: exit 1 naming it, every node started is stopped.
printf '127.0.0.1 servers=1 workers=1\nunreachable.invalid workers=1\n' > "$WORK/bad"
launch --hostfile "$WORK/bad" --config "$config" > "$WORK/out" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "a failed host: exit $rc, expected 1"
grep -q "pstrain launch: unreachable.invalid (worker 1): ssh failed (exit 255)" "$WORK/out" ||
  fail "the failed host is not named"
sleep 1
pgrep -f "$BIN" > /dev/null && fail "nodes left running after a failed host: $(pgrep -af "$BIN")"
echo "ok: a failed host ends the launch, exit 1, nothing left running"

# 4. Ctrl-C: the job stops on every host (exit 3, as any stopped job), and
# nothing is left running.
sed 's/steps: 4/steps: 100000/' "$config" > "$WORK/long.yaml"
# The binary itself in the background, not a function (a subshell of its own).
"$BIN" launch --ssh "$SSH" --grace-s 5 --hostfile "$WORK/hosts" --config "$WORK/long.yaml" \
  > "$WORK/out" 2>&1 &
pid=$!
i=0
until grep -q 'worker 1\].*step' "$WORK/out" 2> /dev/null || [ $i -ge 300 ]; do
  sleep 0.1
  i=$((i + 1))
done
kill -INT $pid
i=0
while kill -0 $pid 2> /dev/null && [ $i -lt 600 ]; do
  sleep 0.1
  i=$((i + 1))
done
kill -0 $pid 2> /dev/null && fail "the launcher still runs 60 s after Ctrl-C"
wait $pid
rc=$?
[ "$rc" = 3 ] || fail "Ctrl-C: exit $rc, expected 3 (stopped)"
grep -q "pstrain launch: stopping the job" "$WORK/out" || fail "no stopping line"
sleep 1
pgrep -f "$BIN" > /dev/null && fail "nodes left running after Ctrl-C: $(pgrep -af "$BIN")"
echo "ok: Ctrl-C stopped the job on every host, exit 3"

# 5. Mistakes are found before anything starts: exit 2, one line.
expect_usage() {
  what="$1"
  shift
  launch "$@" > "$WORK/out" 2>&1
  rc=$?
  [ "$rc" = 2 ] || fail "$what: exit $rc, expected 2"
  [ "$(wc -l < "$WORK/out")" = 1 ] || fail "$what: not one line"
  grep -q "$EXPECT" "$WORK/out" || fail "$what: expected '$EXPECT', got: $(cat "$WORK/out")"
}
printf 'h1 servers=1\nh2 workers=x\n' > "$WORK/typo"
EXPECT="typo:2: workers=x: expected a whole number" expect_usage "a bad count" \
  --hostfile "$WORK/typo" --config "$config"
printf 'h1\n-oProxyCommand=x\n' > "$WORK/opt"
EXPECT="may not start with '-'" expect_usage "a host like an option" --hostfile "$WORK/opt" \
  --config "$config"
printf 'h1\nh1 servers=1\n' > "$WORK/twice"
EXPECT="host h1 is listed already on line 1" expect_usage "a host twice" \
  --hostfile "$WORK/twice" --config "$config"
tiny_job "$BIN" "$WORK/rel" > /dev/null
EXPECT="data.train is '.*train.txt-00000', a relative path" expect_usage "a relative path" \
  --hosts 127.0.0.1 --config "$WORK/rel/tiny.yaml"
echo "ok: mistakes end in one line, exit 2"
exit 0
