#!/bin/bash
# scripts/cluster.sh does what it says: N hosts that reach each other by name, links shaped in
# both directions, `up` idempotent, a failure half-way leaves nothing, `down` removes all, bad
# input and a missing root are one line and exit 2. Runs a cluster of its own (names lstest<pid>,
# subnet 10.215.0.0/24) so that a user's cluster is never touched. Needs root and network
# namespaces: skips without them, fails instead under LOCKSTEP_CI=1.
set -uo pipefail
SRC=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
C=$SRC/scripts/cluster.sh
export LOCKSTEP_CLUSTER_NAME=lstest$$
export LOCKSTEP_CLUSTER_SUBNET=10.215.0
export LOCKSTEP_CLUSTER_DIR=$(mktemp -d)/cluster
H=$LOCKSTEP_CLUSTER_NAME-h
. "$SRC/tests/scripts/checks.sh"
need_namespaces "${H}probe"
trap '"$C" down >/dev/null 2>&1; rm -rf "$(dirname "$LOCKSTEP_CLUSTER_DIR")"' EXIT

ours() { ip netns list | awk '{print $1}' | grep -c "^$LOCKSTEP_CLUSTER_NAME-" || true; }
err_is() {  # err_is "expected stderr line" command...
  local want=$1 out code
  shift
  out=$("$@" 2>&1 >/dev/null)
  code=$?
  [ $code -eq 2 ] && [ "$out" = "$want" ] || { echo "      got exit $code: $out"; return 1; }
}

# Bad input: one line, exit 2, nothing made.
check "N of 0 refused" err_is "cluster.sh: N: expected a number of hosts from 1 to 64, got '0'" "$C" up 0
check "a bad rate refused" \
  err_is "cluster.sh: --rate 'fast': expected a number and a unit (bit, kbit, mbit, gbit, or bps ...), e.g. 1gbit" "$C" up 2 --rate fast
check "an unknown argument refused" err_is "cluster.sh: unknown argument '--speed' (expected --rate RATE or --delay DELAY)" "$C" up 2 --speed 1
# (A copy the unprivileged user can reach: the checkout may sit in a directory only root can
# enter, as a fresh clone under mktemp -d does.)
public=$(mktemp -d)
chmod 755 "$public"
install -m 755 "$C" "$public/cluster.sh"
check "without root: one line" \
  err_is "cluster.sh: needs root to create network namespaces (ip netns add); running as uid 65534" \
  setpriv --reuid 65534 --regid 65534 --clear-groups "$public/cluster.sh" up 2
rm -rf "$public"
# --delay: refused where the kernel lacks netem (this project's VMs), made where it has it. A
# refusal leaves a cluster that is up as it was.
"$C" up 2 >/dev/null
out=$("$C" up 2 --delay 1ms 2>&1)
code=$?
if [ $code -eq 2 ]; then
  check "--delay without netem: one line naming netem" grep -q "needs tc's netem qdisc" <<<"$out"
  check "and the cluster that was up stays" test "$(ours)" -eq 3
else
  check "--delay with netem: up" test $code -eq 0
fi
"$C" down >/dev/null
check "down leaves nothing" test "$(ours)" -eq 0

# Three hosts at 50 Mbit/s.
check "up 3 --rate 50mbit" "$C" up 3 --rate 50mbit
check "3 hosts and the bridge" test "$(ours)" -eq 4
check "hostfile: a line a host" test "$(cat "$LOCKSTEP_CLUSTER_DIR/hostfile")" = "$(printf '%s slots=1\n' "${H}0" "${H}1" "${H}2")"
check "addresses" grep -qx "${H}2 10.215.0.3" "$LOCKSTEP_CLUSTER_DIR/addresses"
check "names resolve inside a host" test "$(ip netns exec "${H}0" getent hosts "${H}2" | awk '{print $1}')" = 10.215.0.3
check "egress shaped (tbf on eth0)" grep -q "tbf" <<<"$(ip netns exec "${H}1" tc qdisc show dev eth0)"
check "ingress shaped (tbf on the bridge port)" grep -q "tbf" <<<"$(ip netns exec "$LOCKSTEP_CLUSTER_NAME-br" tc qdisc show dev port1)"
check "nothing added to this machine's own namespace" bash -c "! ip link show | grep -q '$LOCKSTEP_CLUSTER_NAME\|port[0-9]'"
# 4 MB from host 0 to host 2 over TCP: at 50 Mbit/s no less than 0.64 s (a lower bound only:
# a loaded machine is slower, never faster).
cat >"$(dirname "$LOCKSTEP_CLUSTER_DIR")/recv.py" <<'PY'
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5555)); s.listen(1)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 16)
    if not b: break
    n += len(b)
print(n)
PY
cat >"$(dirname "$LOCKSTEP_CLUSTER_DIR")/send.py" <<'PY'
import socket, sys, time
for _ in range(50):
    try:
        s = socket.create_connection((sys.argv[1], 5555), timeout=5); break
    except OSError: time.sleep(0.1)
t = time.time(); s.sendall(b"x" * 4000000); s.shutdown(socket.SHUT_WR); s.recv(1); print(f"{time.time() - t:.3f}")
PY
ip netns exec "${H}2" timeout 60 python3 "$(dirname "$LOCKSTEP_CLUSTER_DIR")/recv.py" 10.215.0.3 >"$(dirname "$LOCKSTEP_CLUSTER_DIR")/got" &
seconds=$(ip netns exec "${H}0" timeout 60 python3 "$(dirname "$LOCKSTEP_CLUSTER_DIR")/send.py" "${H}2")
wait
check "4 MB arrived" test "$(cat "$(dirname "$LOCKSTEP_CLUSTER_DIR")/got")" = 4000000
echo "      4 MB took ${seconds} s at 50mbit (the bound: 0.64 s)"
check "the link was shaped" python3 -c "import sys; sys.exit(0 if float('$seconds') >= 0.6 else 1)"

# Idempotent: the same arguments change nothing; others remake the cluster.
inode=$(ip netns exec "${H}1" readlink /proc/self/ns/net)
check "up again: already up" grep -q "already up" <<<"$("$C" up 3 --rate 50mbit)"
check "the same namespaces" test "$(ip netns exec "${H}1" readlink /proc/self/ns/net)" = "$inode"
check "status names the hosts" grep -q "${H}2 10.215.0.3/24 egress: qdisc tbf" <<<"$("$C" status)"
check "up 2 unshaped remakes it" "$C" up 2
check "2 hosts and the bridge" test "$(ours)" -eq 3
check "no tbf left" bash -c "! ip netns exec ${H}0 tc qdisc show dev eth0 | grep -q tbf"

# A failure half-way removes what was made: /etc/netns/<host 1> made a file, so its hosts
# file cannot be written.
"$C" down >/dev/null
touch "/etc/netns/${H}1"
"$C" up 3 >/dev/null 2>&1
code=$?
rm -f "/etc/netns/${H}1"
check "a failed up exits non-zero" test $code -ne 0
check "and leaves no namespace" test "$(ours)" -eq 0
check "nor its files" test ! -e "$LOCKSTEP_CLUSTER_DIR"

check "down after down" "$C" down
echo "$failures failure(s)"
[ $failures -eq 0 ]
