#!/bin/bash
# Collectives across emulated hosts at network speed (issue 40's first figures): the cluster of
# scripts/cluster.sh (network namespaces, each host's link shaped both ways with tbf), one rank
# per host, `lockstep bench-comm --backend mpi` (OpenMPI over TCP, its daemons started in the
# namespaces by scripts/netns-agent.sh). For each link rate and host count: allreduce,
# reduce_scatter and all_gather bus bandwidth by size, beside the link rate, which bounds it
# (nccl-tests' busbw is defined so that a ring on links of rate R reaches R: allreduce moves
# 2(n-1)/n of the buffer through each rank's link, all-gather and reduce-scatter (n-1)/n).
# The hosts share this machine's cores, so what a rank computes (the reduction) is slower than
# on a real host; at these link rates the link binds, not the cores.
# The hierarchical backend (one process per host, workers as threads) is not built yet: its
# rows will go beside these.
# Needs root (network namespaces). Usage: bench/cluster.sh [rates="1gbit"] [hosts="2 4"] [max_bytes=16M]
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=${1:-"1gbit"}
HOSTS=${2:-"2 4"}
MAX=${3:-16M}
source bench/peer_lib.sh
machine_line
export LOCKSTEP_CLUSTER_NAME=lsbench LOCKSTEP_CLUSTER_SUBNET=10.216.0
export LOCKSTEP_CLUSTER_DIR=$(mktemp -d)/cluster
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true; rm -rf "$(dirname "$LOCKSTEP_CLUSTER_DIR")"' EXIT
max_hosts=$(tr ' ' '\n' <<<"$HOSTS" | sort -n | tail -1)
out=$(dirname "$LOCKSTEP_CLUSTER_DIR")
printf '%-7s %5s  %-15s %9s %12s %12s %7s\n' link hosts op bytes "busbw GB/s" "link GB/s" "% link"
for rate in $RATES; do
  scripts/cluster.sh up "$max_hosts" --rate "$rate" >/dev/null
  link_gbs=$(python3 -c "
import re; m = re.match(r'([0-9.]+)([kmg]?)bit', '$rate'.lower()); print(float(m.group(1)) * {'': 1, 'k': 1e3, 'm': 1e6, 'g': 1e9}[m.group(2)] / 8e9)")
  for h in $HOSTS; do
    head -n "$h" "$LOCKSTEP_CLUSTER_DIR/hostfile" >"$out/hostfile$h"
    : >"$out/rows"
    for op in allreduce reduce_scatter all_gather; do
      # One op at a time, each under its own time limit: a size that cannot finish is named.
      if ! ip netns exec lsbench-h0 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        LOCKSTEP_MPIRUN_ARGS="--hostfile $out/hostfile$h --mca plm_rsh_agent $PWD/scripts/netns-agent.sh --mca plm_rsh_no_tree_spawn 1 --mca orte_keep_fqdn_hostnames 1 --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0" \
        timeout 300 build/lockstep bench-comm --backend mpi --nproc "$h" --op "$op" --min-bytes 1M --max-bytes "$MAX" --json \
        >>"$out/rows" 2>"$out/err"; then
        echo "$rate $h hosts: $op did not finish in 300 s: $(tail -1 "$out/err")"
      fi
    done
    python3 - "$out/rows" "$rate" "$h" "$link_gbs" <<'PY'
import json, sys
rows, rate, hosts, link = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
for line in open(rows):
    if not line.startswith("{"): continue
    r = json.loads(line)
    if r["op"] == "broadcast" or r["wrong"]: continue
    b = r["bytes"]
    size = f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K"
    print(f"{rate:<7} {hosts:>5}  {r['op']:<15} {size:>9} {r['busbw_gbs']:12.3f} {link:12.3f} {100 * r['busbw_gbs'] / link:6.0f}%")
PY
  done
  scripts/cluster.sh down >/dev/null
done
