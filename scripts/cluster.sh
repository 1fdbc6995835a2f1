#!/bin/bash
# An emulated cluster on one machine: N "hosts" that are network namespaces, joined through a
# bridge, each host's link shaped in both directions with tc.
#
#   scripts/cluster.sh up N [--rate RATE] [--delay DELAY]   make (or remake) N hosts
#   scripts/cluster.sh down                                  remove everything
#   scripts/cluster.sh status                                what is there
#
# Host K is the namespace lockstep-hK with one interface eth0 at 10.214.0.(K+1)/24; the names
# are host names: inside every host (and for `ip netns exec`), /etc/netns/lockstep-hK/hosts
# maps all of them, and scripts/netns-agent.sh starts OpenMPI's daemons in the namespace of
# the same name. The bridge lives in a namespace of its own (lockstep-br), so nothing is added
# to the machine's own network namespace and no traffic can leave the cluster.
#
# --rate (tc's units: 100mbit, 1gbit, 25gbit, ...) shapes each host's egress (on its eth0) and
# its ingress (on the bridge port facing it) with tbf. --delay needs the netem qdisc; a kernel
# without it (like this project's VMs) is refused in one line, exit 2.
#
# Files (LOCKSTEP_CLUSTER_DIR, default /run/lockstep-cluster): hostfile ("lockstep-hK slots=1"
# a line, the format of --hostfile and mpirun), addresses ("lockstep-hK 10.214.0.K+1"), and
# config (n, rate, delay: what `up` made). `up` with the same arguments again is a no-op;
# other arguments remake the cluster; a failure half-way removes what was made. Needs root.
set -eEuo pipefail

me=cluster.sh
# LOCKSTEP_CLUSTER_NAME and _SUBNET let a second cluster (the test's) live beside the first.
NAME=${LOCKSTEP_CLUSTER_NAME:-lockstep}
DIR=${LOCKSTEP_CLUSTER_DIR:-/run/$NAME-cluster}
PREFIX=$NAME-h
BRIDGE_NS=$NAME-br
SUBNET=${LOCKSTEP_CLUSTER_SUBNET:-10.214.0}
MAX_HOSTS=64

die() { echo "$me: $*" >&2; exit 2; }

usage() {
  echo "usage: $me up N [--rate RATE] [--delay DELAY] | down | status" >&2
  exit 2
}

need_root() {
  [ "$(id -u)" -eq 0 ] || die "needs root to create network namespaces (ip netns add); running as uid $(id -u)"
  command -v ip >/dev/null || die "needs iproute2's ip (Debian package iproute2)"
  command -v tc >/dev/null || die "needs iproute2's tc (Debian package iproute2)"
}

# Namespaces of the cluster that exist now, bridge last.
our_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^(${PREFIX}[0-9]+|${BRIDGE_NS})$" | sort -r || true
}

down() {
  local ns
  for ns in $(our_namespaces); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "$DIR"
}

# tc's rate in bits a second (1gbit -> 1000000000), or nothing when it does not parse.
rate_bits() {
  local r=${1,,} n unit
  [[ $r =~ ^([0-9]+([.][0-9]+)?)([kmgt]?)(bit|bps)$ ]] || return 1
  n=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[3]}
  local mult=1
  case $unit in k) mult=1000 ;; m) mult=1000000 ;; g) mult=1000000000 ;; t) mult=1000000000000 ;; esac
  [ "${BASH_REMATCH[4]}" = bps ] && mult=$((mult * 8))
  awk -v n="$n" -v m="$mult" 'BEGIN { printf "%.0f\n", n * m }'
}

# Shapes one interface's egress in namespace $1: tbf at the rate, with a bucket of 10 ms of
# traffic (at least 64 KiB, so a full-size TCP burst passes), queueing at most 100 ms; with a
# delay, netem at the root and the tbf below it.
shape() {
  local ns=$1 dev=$2
  local burst=$((RATE_BITS / 8 / 100))
  [ "$burst" -lt 65536 ] && burst=65536
  if [ -n "$DELAY" ]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "$DELAY"
    [ -n "$RATE" ] && ip netns exec "$ns" tc qdisc add dev "$dev" parent 1: handle 2: tbf rate "$RATE" burst "$burst" latency 100ms
  elif [ -n "$RATE" ]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$RATE" burst "$burst" latency 100ms
  fi
}

up() {
  [ $# -ge 1 ] || usage
  N=$1
  shift
  [[ $N =~ ^[0-9]+$ ]] && [ "$N" -ge 1 ] && [ "$N" -le $MAX_HOSTS ] || die "N: expected a number of hosts from 1 to $MAX_HOSTS, got '$N'"
  RATE="" DELAY=""
  while [ $# -gt 0 ]; do
    case $1 in
      --rate) [ $# -ge 2 ] || die "--rate needs a value (e.g. 1gbit)"; RATE=$2; shift 2 ;;
      --delay) [ $# -ge 2 ] || die "--delay needs a value (e.g. 1ms)"; DELAY=$2; shift 2 ;;
      *) die "unknown argument '$1' (expected --rate RATE or --delay DELAY)" ;;
    esac
  done
  RATE_BITS=0
  if [ -n "$RATE" ]; then
    RATE_BITS=$(rate_bits "$RATE") || die "--rate '$RATE': expected a number and a unit (bit, kbit, mbit, gbit, or bps ...), e.g. 1gbit"
    [ "$RATE_BITS" -gt 0 ] || die "--rate '$RATE': must be above zero"
  fi
  if [ -n "$DELAY" ] && ! [[ ${DELAY,,} =~ ^[0-9]+([.][0-9]+)?(us|ms|s)$ ]]; then
    die "--delay '$DELAY': expected a time such as 500us, 2ms or 0.1s"
  fi
  need_root

  local want
  want=$(printf 'n=%s\nrate=%s\ndelay=%s\n' "$N" "$RATE" "$DELAY")
  if [ -f "$DIR/config" ] && [ "$(cat "$DIR/config")" = "$want" ] && [ "$(our_namespaces | wc -l)" -eq $((N + 1)) ]; then
    echo "$me: already up: $N hosts${RATE:+, $RATE}${DELAY:+, $DELAY} ($DIR/hostfile)"
    return 0
  fi
  if [ -n "$DELAY" ]; then
    # netem is a kernel module some kernels lack: try it once on a scratch namespace.
    local probe=${PREFIX}probe$$
    ip netns add "$probe"
    if ! out=$(ip netns exec "$probe" tc qdisc add dev lo root netem delay "$DELAY" 2>&1); then
      ip netns del "$probe"
      die "--delay needs tc's netem qdisc, which this kernel does not have ($out); shape with --rate alone"
    fi
    ip netns del "$probe"
  fi

  down
  trap 'echo "$me: failed; removing what was made" >&2; down' ERR

  ip netns add "$BRIDGE_NS"
  ip -n "$BRIDGE_NS" link set lo up
  ip -n "$BRIDGE_NS" link add br0 type bridge
  ip -n "$BRIDGE_NS" link set br0 up
  mkdir -p "$DIR"
  : >"$DIR/hostfile.tmp"
  : >"$DIR/addresses.tmp"
  local hosts_lines="127.0.0.1 localhost"$'\n'
  local k
  for ((k = 0; k < N; k++)); do
    hosts_lines+="$SUBNET.$((k + 1)) $PREFIX$k"$'\n'
  done
  for ((k = 0; k < N; k++)); do
    local ns=$PREFIX$k port=port$k
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # The veth is made inside the host namespace, its peer moved into the bridge's.
    ip -n "$ns" link add eth0 type veth peer name "$port"
    ip -n "$ns" link set "$port" netns "$BRIDGE_NS"
    ip -n "$BRIDGE_NS" link set "$port" master br0
    ip -n "$BRIDGE_NS" link set "$port" up
    ip -n "$ns" addr add "$SUBNET.$((k + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape "$ns" eth0                # what host k sends
    shape "$BRIDGE_NS" "$port"      # what host k receives
    mkdir -p "/etc/netns/$ns"
    printf '%s' "$hosts_lines" >"/etc/netns/$ns/hosts"
    echo "$ns slots=1" >>"$DIR/hostfile.tmp"
    echo "$ns $SUBNET.$((k + 1))" >>"$DIR/addresses.tmp"
  done
  mv "$DIR/hostfile.tmp" "$DIR/hostfile"
  mv "$DIR/addresses.tmp" "$DIR/addresses"
  printf '%s\n' "$want" >"$DIR/config"
  trap - ERR
  echo "$me: up: $N hosts ${PREFIX}0..$PREFIX$((N - 1)) on $SUBNET.0/24${RATE:+, links shaped to $RATE each way}${DELAY:+, $DELAY delay}"
  echo "$me: hostfile $DIR/hostfile, addresses $DIR/addresses"
}

status() {
  local namespaces
  namespaces=$(our_namespaces)
  if [ -z "$namespaces" ] && [ ! -f "$DIR/config" ]; then
    echo "$me: down (no namespace ${PREFIX}N or $BRIDGE_NS)"
    return 0
  fi
  if [ -f "$DIR/config" ]; then
    echo "$me: $(tr '\n' ' ' <"$DIR/config")($DIR)"
  else
    echo "$me: namespaces without $DIR/config (a cluster left half-made? run: $me down)"
  fi
  local ns
  for ns in $(echo "$namespaces" | sort); do
    [ "$ns" = "$BRIDGE_NS" ] && continue
    local addr qdisc
    addr=$(ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')
    qdisc=$(ip netns exec "$ns" tc qdisc show dev eth0 2>/dev/null | head -1 | cut -d' ' -f1-2,7-)
    echo "  $ns ${addr:-no address} egress: ${qdisc:-none}"
  done
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
  up) up "$@" ;;
  down) [ $# -eq 0 ] || usage; need_root; down; echo "$me: down" ;;
  status) [ $# -eq 0 ] || usage; need_root; status ;;
  *) usage ;;
esac
