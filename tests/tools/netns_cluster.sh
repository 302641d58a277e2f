# A cluster of hosts on one machine, for tests and benches that must cross a
# host boundary: each host is a network namespace with one veth link into a
# bridge (in a hub namespace of its own) and one address from the
# benchmarking range 198.18.0.0/15 (RFC 2544). Nothing routes anywhere else:
# the hosts have no default route and the hub has no link to the machine's
# own namespace, so their traffic never leaves the bridge. POSIX sh (dash
# and bash); needs root (ip netns, iproute2's ip and tc).
#
# Usage (source it, then):
#   . tests/tools/netns_cluster.sh
#   trap 'netns_teardown' EXIT          # or call it from your own cleanup
#   trap 'exit 1' HUP INT TERM          # so a signal runs the EXIT trap
#   netns_setup sched s0 w0 w1=198.18.7.7
#   netns_bg s0 "$BIN" > s0.log 2>&1    # NETNS_PID: its process id
#   netns_exec w0 "$BIN" --version      # in the foreground
#   netns_teardown || exit 1            # asserts nothing of ours is left
#
# Functions:
#   netns_setup HOST[=ADDR]...  Creates the hub and one host per argument
#     (names: letters, digits, '_' and '-'). Each host gets ADDR, else
#     198.18.0.1, 198.18.0.2, ... in argument order (prefix /15), and its lo
#     up. Exits 77 (CTest's skip code) saying why when namespaces, a bridge
#     or veth pairs cannot be made or a process cannot run in a host, so
#     call it before anything worth keeping. Call it once, in the test's
#     own shell (not in a subshell: the other functions read its state).
#   netns_addr HOST             Prints HOST's address.
#   netns_ns HOST               Prints HOST's namespace name (for `ip -n`).
#   netns_exec HOST CMD...      Runs CMD in HOST, in the foreground; returns
#     its status. The environment and open files are inherited.
#   netns_bg HOST CMD...        Runs CMD in HOST in the background (the
#     caller's redirections apply); NETNS_PID is its process id (CMD itself:
#     `ip netns exec` execs it). Teardown kills it if still running.
#   netns_limit HOST MBIT       Limits HOST's link to MBIT Mbit/s in each
#     direction (tc tbf on the egress of both ends of its veth); MBIT 0
#     removes the limit.
#   netns_cut HOST              Pulls HOST's cable: the bridge's end of its
#     link goes down, so packets both ways vanish (no error is returned to
#     anyone; HOST's own interface keeps its address and routes).
#   netns_restore HOST          Plugs it back in.
#   netns_teardown              Kills every process in the hosts and the hub
#     (those netns_bg started and any they left), deletes the namespaces,
#     and checks that no namespace, link or process of this cluster is
#     left; returns 1 saying what is left. Safe to call twice, and before
#     or without netns_setup.
#
# Names are unique per run (NETNS_TAG, "pn" and 6 random hex digits), so
# tests running in parallel never share a namespace or a link. Every link is
# created inside a namespace of this run (never in the machine's own), the
# hub's ends named NETNS_TAG plus "h" and the host's index. Clean up only
# through netns_teardown, never by pattern ("ip netns del" of every pn*):
# the hub holds no process, so deleting its name destroys the bridge at
# once, and another test running beside yours loses every link mid-job.

NETNS_TAG=
NETNS_DIR=
NETNS_PID=

# netns_skip REASON: a test that cannot run here (what was made is undone).
netns_skip() {
  echo "skipped: $*"
  netns_teardown
  exit 77
}

netns_setup() {
  [ -z "$NETNS_TAG" ] || { echo "netns_setup: called twice" >&2; exit 1; }
  command -v ip > /dev/null || netns_skip "no ip command (iproute2)"
  NETNS_DIR=$(mktemp -d) || exit 1
  : > "$NETNS_DIR/hosts"
  : > "$NETNS_DIR/pids"
  NETNS_TAG=pn$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  _nhub="$NETNS_TAG-hub"
  ip netns add "$_nhub" 2> "$NETNS_DIR/err" ||
    netns_skip "cannot create network namespaces (needs root): $(cat "$NETNS_DIR/err")"
  ip -n "$_nhub" link add br0 type bridge 2> /dev/null || netns_skip "cannot create a bridge"
  ip -n "$_nhub" link set br0 up
  ip -n "$_nhub" link set lo up
  _ni=0
  for _nspec; do
    _ni=$((_ni + 1))
    _nname=${_nspec%%=*}
    _naddr=${_nspec#*=}
    [ "$_naddr" != "$_nspec" ] || _naddr=198.18.$((_ni / 250)).$((_ni % 250))
    case "$_nname" in
      '' | *[!A-Za-z0-9_-]*) echo "netns_setup: bad host name '$_nname'" >&2; exit 1 ;;
    esac
    _nns="$NETNS_TAG-$_nname"
    ip netns add "$_nns" || { echo "netns_setup: ip netns add $_nns failed" >&2; exit 1; }
    ip link add "${NETNS_TAG}h$_ni" netns "$_nhub" type veth peer name eth0 netns "$_nns" 2> /dev/null ||
      netns_skip "cannot create veth pairs"
    ip -n "$_nhub" link set "${NETNS_TAG}h$_ni" master br0 up
    ip -n "$_nns" addr add "$_naddr/15" dev eth0
    ip -n "$_nns" link set eth0 up
    ip -n "$_nns" link set lo up
    echo "$_nname $_ni $_naddr" >> "$NETNS_DIR/hosts"
  done
  ip netns exec "$_nns" true 2> /dev/null || netns_skip "cannot run a process in a namespace"
}

# netns_field HOST COLUMN: a column of HOST's line in the hosts file.
netns_field() {
  _nv=$(awk -v h="$1" -v c="$2" '$1 == h { print $c }' "$NETNS_DIR/hosts" 2> /dev/null)
  [ -n "$_nv" ] || { echo "netns: no host '$1'" >&2; return 1; }
  echo "$_nv"
}
netns_addr() { netns_field "$1" 3; }
netns_ns() { netns_field "$1" 1 > /dev/null && echo "$NETNS_TAG-$1"; }

netns_exec() {
  _nns=$(netns_ns "$1") || return 1
  shift
  ip netns exec "$_nns" "$@"
}
netns_bg() {
  _nns=$(netns_ns "$1") || return 1
  shift
  ip netns exec "$_nns" "$@" &
  NETNS_PID=$!
  echo "$NETNS_PID" >> "$NETNS_DIR/pids"
}

# netns_hub_end HOST: the name of the bridge's end of HOST's link.
netns_hub_end() {
  _ni=$(netns_field "$1" 2) || return 1
  echo "${NETNS_TAG}h$_ni"
}

netns_limit() {
  _nns=$(netns_ns "$1") && _nhub_end=$(netns_hub_end "$1") || return 1
  if [ "$2" = 0 ]; then
    tc -n "$_nns" qdisc del dev eth0 root 2> /dev/null
    tc -n "$NETNS_TAG-hub" qdisc del dev "$_nhub_end" root 2> /dev/null
    return 0
  fi
  # A bucket of 20 ms of traffic (at least 64 KiB, a whole GSO packet) and
  # up to 100 ms of queue, so TCP meets a steady rate rather than drops.
  _nburst=$(($2 * 1000000 / 8 / 50))
  [ "$_nburst" -ge 65536 ] || _nburst=65536
  tc -n "$_nns" qdisc replace dev eth0 root tbf rate "${2}mbit" burst "$_nburst" latency 100ms &&
    tc -n "$NETNS_TAG-hub" qdisc replace dev "$_nhub_end" root tbf rate "${2}mbit" burst "$_nburst" \
      latency 100ms
}

netns_cut() {
  _nhub_end=$(netns_hub_end "$1") && ip -n "$NETNS_TAG-hub" link set "$_nhub_end" down
}
netns_restore() {
  _nhub_end=$(netns_hub_end "$1") && ip -n "$NETNS_TAG-hub" link set "$_nhub_end" up
}

# netns_all: every namespace of this run that exists now.
netns_all() {
  [ -n "$NETNS_TAG" ] || return 0
  ip netns list 2> /dev/null | awk -v t="$NETNS_TAG-" 'index($1, t) == 1 { print $1 }'
}

netns_teardown() {
  [ -n "$NETNS_TAG" ] || return 0
  # Processes first: a namespace that still holds one outlives its name.
  for _np in $(cat "$NETNS_DIR/pids" 2> /dev/null); do kill -9 "$_np" 2> /dev/null; done
  for _nns in $(netns_all); do
    for _np in $(ip netns pids "$_nns" 2> /dev/null); do kill -9 "$_np" 2> /dev/null; done
  done
  for _np in $(cat "$NETNS_DIR/pids" 2> /dev/null); do wait "$_np" 2> /dev/null; done
  # A process killed above may take a moment to leave; wait up to 5 s.
  _nt=0
  while [ "$_nt" -lt 50 ]; do
    _nleft=
    for _nns in $(netns_all); do _nleft="$_nleft$(ip netns pids "$_nns" 2> /dev/null)"; done
    [ -n "$_nleft" ] || break
    sleep 0.1
    _nt=$((_nt + 1))
  done
  netns_left=
  for _np in $_nleft; do netns_left="$netns_left process $_np;"; done
  for _nns in $(netns_all); do ip netns del "$_nns" 2> /dev/null; done
  for _nns in $(netns_all); do netns_left="$netns_left namespace $_nns;"; done
  for _np in $(cat "$NETNS_DIR/pids" 2> /dev/null); do
    # kill -0 also finds a zombie: a child not waited for is still ours.
    kill -0 "$_np" 2> /dev/null && netns_left="$netns_left process $_np;"
  done
  _nlinks=$(ip -o link show 2> /dev/null | awk -F': ' -v t="$NETNS_TAG" 'index($2, t) == 1 { print $2 }')
  for _nl in $_nlinks; do netns_left="$netns_left link $_nl;"; done
  if [ -n "$netns_left" ]; then
    echo "netns_teardown: left behind:$netns_left" >&2
    return 1
  fi
  rm -rf "$NETNS_DIR"
  NETNS_TAG=
  return 0
}
