#!/bin/sh
# The ring all-reduce over TCP between hosts: `pstrain bench allreduce
# --transport tcp --netns ...` with each rank on a host of its own (network
# namespaces on one bridge, tests/tools/netns_cluster.sh), every host's link
# unlimited (MBIT 0) or limited to MBIT Mbit/s each way (tc tbf). Prints the
# bench's JSON lines (docs/formats.md, "Benchmark output"), each with
# "link_mbit" added:
#   {"bench":"allreduce","backend":"cpu_ring_tcp","bytes":67108864,"world":4,"hosts":4,...,"link_mbit":0}
# With LOOPBACK=1, each round also runs the same cases with every rank on
# this machine's loopback (TCP, then shared memory) for reference: lines
# without "link_mbit". With COMPARE_BIN (another pstrain, e.g. an older
# build), each case (size and world) runs with both binaries in turn, so
# that both meet the same machine load; lines then carry "bin": "new"
# (PSTRAIN_BIN) or "old".
# Needs root (network namespaces); exits 77 otherwise.
# Usage: sh tests/bench/allreduce_hosts_bench.sh PSTRAIN_BIN [MBIT...]   (default 0)
# Environment: BYTES (default 4194304,67108864), WORLDS (default 2,4),
# ROUNDS (default 1), LOOPBACK, COMPARE_BIN.
set -u
[ $# -ge 1 ] || { echo "usage: $0 PSTRAIN_BIN [MBIT...]" >&2; exit 2; }
BIN=$(readlink -f "$1")
shift
[ $# -gt 0 ] || set -- 0
BYTES=${BYTES:-4194304,67108864}
WORLDS=${WORLDS:-2,4}
ROUNDS=${ROUNDS:-1}
LOOPBACK=${LOOPBACK:-0}
COMPARE_BIN=${COMPARE_BIN:-}
[ -z "$COMPARE_BIN" ] || COMPARE_BIN=$(readlink -f "$COMPARE_BIN")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
. "$REPO/tests/tools/netns_cluster.sh"
trap 'netns_teardown' EXIT
trap 'exit 1' HUP INT TERM
HOSTS="h0 h1 h2 h3"
# As many hosts as the largest world.
max=$(echo "$WORLDS" | tr ',' '\n' | sort -n | tail -1)
[ "$max" -le 4 ] || HOSTS="$HOSTS $(seq -s ' ' -f 'h%g' 4 $((max - 1)))"
netns_setup $HOSTS
NAMESPACES=
for h in $HOSTS; do NAMESPACES="$NAMESPACES${NAMESPACES:+,}$(netns_ns "$h")"; done

# run TAGS LABEL BIN ARGS...: one bench run; its lines get TAGS (text such
# as ,"link_mbit":0) and, when two binaries are compared, the binary's label.
run() {
  tags=$1 label=$2 bin=$3
  shift 3
  [ -z "$COMPARE_BIN" ] || tags="$tags,\"bin\":\"$label\""
  out=$("$bin" bench allreduce "$@") || {
    echo "allreduce_hosts_bench: $bin bench allreduce $* failed" >&2
    return 1
  }
  printf '%s\n' "$out" | sed "s/}\$/$tags}/"
}

# cases TAGS ARGS...: every size and world, one at a time, each run with
# PSTRAIN_BIN and then, when set, COMPARE_BIN.
cases() {
  tags=$1
  shift
  for bytes in $(echo "$BYTES" | tr ',' ' '); do
    for world in $(echo "$WORLDS" | tr ',' ' '); do
      run "$tags" new "$BIN" --bytes "$bytes" --world "$world" "$@" || return 1
      [ -z "$COMPARE_BIN" ] ||
        run "$tags" old "$COMPARE_BIN" --bytes "$bytes" --world "$world" "$@" || return 1
    done
  done
}

status=0
round=0
while [ $round -lt "$ROUNDS" ]; do
  round=$((round + 1))
  if [ "$LOOPBACK" = 1 ]; then
    cases "" --transport tcp || status=1
    cases "" --transport shm || status=1
  fi
  for mbit; do
    for h in $HOSTS; do netns_limit "$h" "$mbit" || { echo "allreduce_hosts_bench: tc failed" >&2; exit 1; }; done
    cases ",\"link_mbit\":$mbit" --transport tcp --netns "$NAMESPACES" || status=1
  done
done
netns_teardown || exit 1
exit $status
