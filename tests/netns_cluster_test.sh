#!/bin/sh
# The namespace cluster the multi-host tests and benches stand on
# (tests/tools/netns_cluster.sh): three hosts reach each other at their own
# addresses and nothing beyond 198.18.0.0/15; a cut link carries nothing and
# a restored one carries again; a rate limit holds in both directions; and
# teardown kills what ran in the hosts and leaves no namespace, link or
# process behind, even for a second cluster torn down by its EXIT trap after
# a failure.
#
# Needs root and python3; skipped (77) otherwise. Usage: sh tests/netns_cluster_test.sh
set -u
TOOLS="$(cd "$(dirname "$0")/tools" && pwd)"
. "$TOOLS/netns_cluster.sh"
trap 'netns_teardown' EXIT
trap 'exit 1' HUP INT TERM
fail() {
  echo "FAILED: $*"
  exit 1
}
command -v python3 > /dev/null || netns_skip "python3 is not installed"
PROBE="python3 $TOOLS/tcp_probe.py"
PORT=9000

netns_setup a b c=198.19.200.7
[ "$(netns_addr a)" = 198.18.0.1 ] || fail "a has address $(netns_addr a)"
[ "$(netns_addr c)" = 198.19.200.7 ] || fail "c has address $(netns_addr c)"
for h in a b c; do netns_bg "$h" $PROBE sink $PORT > /dev/null 2>&1; done
SINK_C=$NETNS_PID

# send FROM TO BYTES TIMEOUT: prints the seconds the transfer took; fails
# (returns 1) when it did not go through.
send() { netns_exec "$1" $PROBE send "$(netns_addr "$2")" $PORT "$3" "$4"; }
# reach FROM TO: FROM reaches TO within 10 s (the sink may still be starting).
reach() {
  t=0
  until send "$1" "$2" 1 1 > /dev/null; do
    t=$((t + 1))
    [ "$t" -lt 10 ] || fail "$1 cannot reach $2 at $(netns_addr "$2")"
    sleep 1
  done
}
reach a b
reach b c
reach c a
echo "a, b and c reach each other"

for h in a b c; do
  route=$(ip -n "$(netns_ns "$h")" route get 192.0.2.1 2>&1) &&
    fail "$h has a route beyond its network: $route"
done
echo "no host routes beyond 198.18.0.0/15: $route"

netns_cut b
out=$(send a b 1 2) && fail "a reached b through a cut link"
echo "a to b, b's link cut: $out"
out=$(send b c 1 2) && fail "b reached c through a cut link"
netns_restore b
reach a b
reach b c
echo "b's link restored: a and b reach each other again"

# 1.5 MB at 4 Mbit/s takes 3 s but for the bucket's 64 KiB; allow for it
# and the clock.
netns_limit b 4 || fail "cannot limit b's link"
for dir in "a b" "b a"; do
  took=$(send $dir 1500000 60) || fail "send $dir with a limit: $took"
  awk -v t="$took" 'BEGIN { exit !(t >= 2.5) }' ||
    fail "1.5 MB from ${dir% *} to ${dir#* } at 4 Mbit/s took $took s, under 2.5 s"
  echo "1.5 MB from ${dir% *} to ${dir#* } at 4 Mbit/s: $took s"
done
netns_limit b 0 || fail "cannot lift b's limit"
tc -n "$(netns_ns b)" qdisc show dev eth0 | grep -q tbf && fail "b's limit is still there"

# Teardown kills the sinks, and a second cluster in a child shell is torn
# down by its EXIT trap when that shell fails, its process killed.
nss=$(ip netns list | awk -v t="$NETNS_TAG-" 'index($1, t) == 1 { print $1 }' | tr '\n' ' ')
tag=$NETNS_TAG
netns_teardown || fail "teardown left something"
kill -0 "$SINK_C" 2> /dev/null && fail "c's sink survived teardown"
ip netns list | grep -q "^$tag-" && fail "namespaces of $tag survived teardown"
echo "teardown removed $nss"

out=$(sh -c ". '$TOOLS/netns_cluster.sh'; trap netns_teardown EXIT
  netns_setup x y; netns_bg x sleep 600 > /dev/null; echo \$NETNS_TAG \$NETNS_PID; false")
pid=${out#* }
out=${out% *}
[ -n "$out" ] && [ -n "$pid" ] || fail "the child cluster did not start"
kill -0 "$pid" 2> /dev/null && fail "a failed test's trap left its process $pid"
ip netns list | grep -q "^$out-" && fail "a failed test's trap left namespaces of $out: $(ip netns list)"
ip -o link show | grep -q "$out" && fail "a failed test's trap left links of $out"
echo "a failing child's trap removed cluster $out"
echo "netns_cluster_test: passed"
