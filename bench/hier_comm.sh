#!/bin/bash
# The hierarchical backend against one MPI rank a worker, across emulated hosts (issue 40,
# part 3): allreduce bandwidth by size on the cluster of scripts/cluster.sh, H hosts x 2
# workers, for
#   hier  `bench-comm --backend hier --workers-per-host 2`: one process a host, its two workers
#         threads (reduce-scatter inside the host, each worker allreduces its half across hosts,
#         all-gather inside the host)
#   mpi   `bench-comm --backend mpi`: 2H processes, two a host, lockstep's reduce-scatter +
#         all-gather over MPI point-to-point (shared memory inside a host, TCP between)
# at each link rate ("none": unshaped veth links, where what binds is the software, as on a real
# cluster whose links are faster than MPI's shared memory; else tbf both ways).
# Columns: algbw (buffer bytes / time) and, on a shaped link, its share of the bound a host's
# link sets on any allreduce: link / (2(H-1)/H) (each host must send and receive 2(H-1)/H of the
# buffer; traffic inside a host is free).
# The hosts share this machine's cores (2 here): the reductions compete for them, which real
# hosts would not. Needs root. Usage: bench/hier_comm.sh [rates="none 1gbit"] [hosts="2 4"] [max=64M]
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=${1:-"none 1gbit"}
HOSTS=${2:-"2 4"}
MAX=${3:-64M}
source bench/peer_lib.sh
machine_line
export LOCKSTEP_CLUSTER_NAME=lshier LOCKSTEP_CLUSTER_SUBNET=10.217.0
export LOCKSTEP_CLUSTER_DIR=$(mktemp -d)/cluster
out=$(dirname "$LOCKSTEP_CLUSTER_DIR")
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
max_hosts=$(tr ' ' '\n' <<<"$HOSTS" | sort -n | tail -1)
mpirun_args() {  # $1: hostfile
  echo "--hostfile $1 --mca plm_rsh_agent $PWD/scripts/netns-agent.sh --mca plm_rsh_no_tree_spawn 1 --mca orte_keep_fqdn_hostnames 1 --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0"
}
printf '%-6s %5s %7s %-5s %9s %11s %9s\n' link hosts workers kind bytes "algbw GB/s" "% bound"
for rate in $RATES; do
  if [ "$rate" = none ]; then
    scripts/cluster.sh up "$max_hosts" >/dev/null
    link_gbs=0
  else
    scripts/cluster.sh up "$max_hosts" --rate "$rate" >/dev/null
    link_gbs=$(python3 -c "
import re; m = re.match(r'([0-9.]+)([kmg]?)bit', '$rate'.lower()); print(float(m.group(1)) * {'': 1, 'k': 1e3, 'm': 1e6, 'g': 1e9}[m.group(2)] / 8e9)")
  fi
  for h in $HOSTS; do
    head -n "$h" "$LOCKSTEP_CLUSTER_DIR/hostfile" >"$out/hier$h"
    sed 's/slots=1/slots=2/' "$out/hier$h" >"$out/mpi$h"
    : >"$out/rows"
    for kind in hier mpi; do
      if [ $kind = hier ]; then flags="--backend hier --workers-per-host 2"; else flags="--backend mpi"; fi
      # mpirun runs on host 0, under that host's own name like the others (netns-agent.sh).
      h0=${LOCKSTEP_CLUSTER_NAME}-h0
      if ! ip netns exec "$h0" unshare --uts sh -c "hostname $h0 && exec env OMPI_ALLOW_RUN_AS_ROOT=1 \
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LOCKSTEP_MPIRUN_ARGS='$(mpirun_args "$out/$kind$h")' \
        timeout 400 build/lockstep bench-comm $flags --nproc $((2 * h)) --op allreduce --min-bytes 1M \
        --max-bytes $MAX --json" >"$out/$kind.json" 2>"$out/err"; then
        echo "$rate $h hosts $kind: did not finish in 400 s: $(tail -1 "$out/err")"
      fi
      sed "s/^{/{\"kind\":\"$kind\",/" "$out/$kind.json" | grep '^{' >>"$out/rows" || true
    done
    python3 - "$out/rows" "$rate" "$h" "$link_gbs" <<'PY'
import json, sys
rows, rate, hosts, link = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
by = {}
for line in open(rows):
    r = json.loads(line)
    if r["wrong"]: print("WRONG VALUES", r); continue
    by.setdefault(r["bytes"], {})[r["kind"]] = r["algbw_gbs"]
    b = r["bytes"]
    size = f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K"
    bound = f"{100 * r['algbw_gbs'] * 2 * (hosts - 1) / hosts / link:8.0f}%" if link > 0 else "       -"
    print(f"{rate:<6} {hosts:>5} {2 * hosts:>7} {r['kind']:<5} {size:>9} {r['algbw_gbs']:11.3f} {bound}")
for b, k in sorted(by.items()):
    if "hier" in k and "mpi" in k:
        print(f"{rate:<6} {hosts:>5}  hier / mpi at {b >> 20}M: {k['hier'] / k['mpi']:.2f}x")
PY
  done
  scripts/cluster.sh down >/dev/null
done
