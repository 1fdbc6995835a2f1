#!/bin/bash
# `lockstep plan --hosts` on two emulated hosts (scripts/cluster.sh, links shaped to 100 Mbit/s
# each way), a two-block gpt-tiny at context 32 so the profile takes seconds:
#  - a hosts list naming unequal workers, or --nproc other than its slots: one line, exit 2;
#  - the plan names the hosts, finds they share this machine's cores, plans 2 workers on 2
#    hosts with the hier backend, and offers no tensor-parallel layout (tp=2 would cross hosts);
#  - the collectives were measured across the shaped link: the cached allreduce curve over 2
#    hosts takes at least 70% of the link's time for 1 MiB (2 (n-1)/n x 8 Mbit / 100 Mbit/s),
#    which a curve measured inside one machine misses by orders of magnitude; and the dp=2 row's
#    exposed communication is at least the link's time for its gradient (one bucket after
#    backward: nothing hides it).
# Needs root and network namespaces: skips without them, fails under LOCKSTEP_CI=1.
# Usage: plan_hosts_test.sh SOURCE_DIR LOCKSTEP_BINARY
set -uo pipefail
SRC=$1
BIN=$2
export LOCKSTEP_CLUSTER_NAME=lsplan$$
export LOCKSTEP_CLUSTER_SUBNET=10.221.0
export LOCKSTEP_CLUSTER_DIR=$(mktemp -d)/cluster
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
H=$LOCKSTEP_CLUSTER_NAME-h
. "$SRC/tests/scripts/checks.sh"
need_namespaces "${H}probe"
work=$(mktemp -d -t lockstep-plan-hosts-test.XXXXXX)
trap '"$SRC/scripts/cluster.sh" down >/dev/null 2>&1; rm -rf "$work" "$(dirname "$LOCKSTEP_CLUSTER_DIR")"' EXIT
cd "$SRC"
"$SRC/scripts/cluster.sh" up 2 --rate 100mbit >"$work/up.log" 2>&1 || { cat "$work/up.log"; echo "FAIL  cluster.sh up 2"; exit 1; }

# On host 0 under its own name, mpirun reaching host 1 through scripts/netns-agent.sh.
on_h0() {
  ip netns exec "${H}0" unshare --uts sh -c "hostname ${H}0 && exec env LOCKSTEP_MPIRUN_ARGS='--mca plm_rsh_agent \
$SRC/scripts/netns-agent.sh --mca plm_rsh_no_tree_spawn 1 --mca orte_keep_fqdn_hostnames 1' timeout 300 \"\$@\"" sh "$@"
}
model=(--config configs/gpt-tiny.toml --set model.layers=2 --set model.context=32 --set train.batch_size=4)
one_line_exit2() {  # name, then the command: exit 2 and exactly one line on stderr
  local name=$1
  shift
  "$@" >/dev/null 2>"$work/$name.err"
  local rc=$?
  [ $rc -eq 2 ] && [ "$(grep -c . "$work/$name.err")" -eq 1 ] || { echo "      rc $rc: $(cat "$work/$name.err")"; return 1; }
}
check "unequal workers a host: one line, exit 2" one_line_exit2 unequal on_h0 "$BIN" plan "${model[@]}" --hosts "${H}0:2,${H}1:1"
check "--nproc other than the slots: one line, exit 2" one_line_exit2 nproc on_h0 "$BIN" plan "${model[@]}" --hosts "${H}0,${H}1" --nproc 3
check "a host named twice: one line, exit 2" one_line_exit2 twice on_h0 "$BIN" plan "${model[@]}" --hosts "${H}0,${H}0"

on_h0 "$BIN" plan "${model[@]}" --hosts "${H}0,${H}1" --out "$work/cache" --json "$work/plan.json" >"$work/plan.log" 2>&1
rc=$?
check "plan --hosts ran" test $rc -eq 0
[ $rc -eq 0 ] || cat "$work/plan.log"
check "it names the hosts and finds they share this machine's cores" \
  grep -q "^hosts: ${H}0:1,${H}1:1, .* cores each; they run on this machine's kernel" "$work/plan.log"
check "2 workers on 2 hosts, hier backend" grep -q "^gpt, 2 workers on 2 hosts (hier backend)" "$work/plan.log"
python3 - "$work/plan.json" "$work/cache/plan-profile.json" <<'PY'
import json, sys
plan, cache = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
fails = 0
def check(what, ok, detail=""):
    global fails
    print(("ok    " if ok else "FAIL  ") + what + ("" if ok else "  " + detail))
    fails += not ok
layouts = {r["layout"] for r in plan["layouts"]}
check("no layout splits a tp group across the hosts", not any("tp=2" in l for l in layouts), str(layouts))
check("dp=2 and pp=2 are planned", {"dp=2,tp=1,pp=1", "dp=1,tp=1,pp=2"} <= layouts, str(layouts))
curves = [e for slot in cache["comm"].values() for e in slot]
across = {(e["op"], e["group"]): dict((b, ms) for b, ms in e["points"]) for e in curves if e.get("hosts") == 2}
link_ms = 2 * 0.5 * 8 * 2**20 / 100e6 * 1e3  # 1 MiB allreduce over 2 hosts at 100 Mbit/s
ar = across.get(("allreduce", 2), {})
check("allreduce measured across 2 hosts", 2**20 in ar, str(sorted(across)))
check(f"1 MiB across takes >= 70% of the link's {link_ms:.0f} ms", ar.get(2**20, 0) >= 0.7 * link_ms, str(ar.get(2**20)))
check("a send measured across 2 hosts (pp=2 crosses them)", ("send", 2) in across, str(sorted(across)))
row = next(r for r in plan["layouts"] if r["layout"] == "dp=2,tp=1,pp=1" and r["zero"] == 0 and r["microbatches"] == 1
           and r["precision"] == "fp32" and r["recompute"] == "none")
grad_ms = 2 * 0.5 * row["rank0"]["params_bytes"] * 8 / 100e6 * 1e3
check(f"dp=2's exposed communication >= 70% of its gradient's link time ({grad_ms:.1f} ms)",
      row["comm_exposed_ms"] >= 0.7 * grad_ms, str(row["comm_exposed_ms"]))
sys.exit(1 if fails else 0)
PY
[ $? -eq 0 ] || failures=$((failures + 1))
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
