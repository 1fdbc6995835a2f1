#!/bin/bash
# What PowerSGD and DiLoCo buy in time when the link binds (issue 41, time half): gpt-tiny
# data-parallel on 4 emulated hosts (scripts/cluster.sh: network namespaces, each host's link
# shaped both ways with tbf), one worker per host (`--backend mpi`, one rank per host: the
# hierarchical one-process-per-host backend is not built yet), 1 compute thread each, the
# global batch of gpt-tiny (16 x 128). For each link rate: tokens/s over steps 11 to S - 1 (S =
# steps, default 211: steps 11..210, so DiLoCo H = 50 synchronises exactly 4 times in 200 steps,
# its rate; the run's last step, which always synchronises, is left out) of
# synchronous DP, PowerSGD rank 4 and DiLoCo H = 50, beside PyTorch DDP (gloo) and PyTorch DDP
# with its PowerSGD hook at rank 4, run in the same namespaces with the same batch and threads
# (the peer prints its median step; torch 1.13's hook needs the gradient in one bucket, see
# bench/low_comm.sh). "compute only": the same 4 workers never exchanging gradients inside the
# measured steps (DiLoCo with H larger than the run) on unshaped links; "sync, unshaped": the
# synchronous run on the veth links without shaping.
# The 4 hosts share this machine's 2 cores (half a core each): the link rates are scaled to
# that (see the printed ratio).
# "diloco-h50-f4": streaming DiLoCo, 4 fragments (one synchronised every 12 or 13 steps), each exchange
# blocking its step; "diloco-h50-f4-tau5": the same with each exchange overlapping the next 5
# inner steps (train.diloco_overlap_steps).
# Needs root. Usage: bench/low_comm_time.sh [steps=211] [rates="200mbit 1gbit"] [rows]
# rows: the lockstep rows to run, by name (default all), plus "pytorch" for the two peer rows.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-211}
RATES=${2:-"200mbit 1gbit"}
ROWS=${3:-"sync powersgd-r4 diloco-h50 diloco-h50-f4 diloco-h50-f4-tau5 pytorch"}
wanted() { [[ " $ROWS " == *" $1 "* ]]; }
source bench/peer_lib.sh
peer_setup
machine_line
export LOCKSTEP_CLUSTER_NAME=lslow LOCKSTEP_CLUSTER_SUBNET=10.217.0
tmp=$(mktemp -d)
export LOCKSTEP_CLUSTER_DIR=$tmp/cluster
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
peer_one_bucket_wrapper "$tmp"

ls_run() {  # name, then flags; prints tokens/s over the run after its first 10 steps, and bytes a step
  local name=$1
  shift
  ip netns exec lslow-h0 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    LOCKSTEP_MPIRUN_ARGS="--hostfile $tmp/cluster/hostfile --mca plm_rsh_agent $PWD/scripts/netns-agent.sh --mca plm_rsh_no_tree_spawn 1 --mca orte_keep_fqdn_hostnames 1" \
    timeout 900 build/lockstep train --config configs/gpt-tiny.toml --backend mpi --mpi-if eth0 --nproc 4 --steps "$STEPS" \
    --set train.threads=1 --set eval.batches=1 --set eval.every=0 --set train.log_every=50 --out "$tmp/$name" "$@" \
    >"$tmp/$name.log" 2>&1 || { echo "0 0"; return; }
  python3 - "$tmp/$name/metrics.jsonl" <<'PYX'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t = [r for r in rows if "loss" in r and "event" not in r][10:-1]
tokens = 16 * 128 * len(t)
print(f"{tokens / (sum(r['step_ms'] for r in t) / 1e3):.0f} {sum(r['comm_bytes'] for r in t) / len(t):.0f}")
PYX
}

peer_run_ns() {  # extra args; prints the peer's tokens/s (median step)
  local port=$((29700 + RANDOM % 200)) r
  for r in 0 1 2 3; do
    ip netns exec lslow-h$r env $(peer_env 1) MASTER_ADDR=10.217.0.1 MASTER_PORT=$port WORLD_SIZE=4 RANK=$r \
      GLOO_SOCKET_IFNAME=eth0 timeout 900 /usr/bin/python3 "$tmp/one_bucket.py" "$PEERS/torch_gpt.py" --ddp \
      --steps "$STEPS" --corpus /usr/share/games/fortunes --no-val "$@" >"$tmp/peer$r.log" 2>&1 &
  done
  wait || true
  grep -o 'tokens/s=[0-9]*' "$tmp/peer0.log" | cut -d= -f2 || echo 0
  grep -q openblas "$tmp/peer0.log" || { echo "bench: the peer did not run on OpenBLAS" >&2; exit 1; }
}

printf "%-9s %-20s %10s %14s %10s\n" link run tokens/s "bytes a step" "vs compute"
scripts/cluster.sh up 4 >/dev/null
read -r compute _ <<<"$(ls_run compute --set train.sync=diloco --set train.diloco_inner_steps=1000000)"
printf "%-9s %-20s %10s %14s %10s\n" unshaped "compute only" "$compute" 0 "100%"
read -r tps bytes <<<"$(ls_run sync-unshaped)"
printf "%-9s %-20s %10s %14s %9.0f%%\n" unshaped "lockstep sync" "$tps" "$bytes" "$(python3 -c "print(100*$tps/$compute)")"
scripts/cluster.sh down >/dev/null
for rate in $RATES; do
  scripts/cluster.sh up 4 --rate "$rate" >/dev/null
  for row in "sync|" "powersgd-r4|--set train.grad_compression=powersgd --set train.powersgd_rank=4" \
             "diloco-h50|--set train.sync=diloco --set train.diloco_inner_steps=50" \
             "diloco-h50-f4|--set train.sync=diloco --set train.diloco_inner_steps=50 --set train.diloco_fragments=4" \
             "diloco-h50-f4-tau5|--set train.sync=diloco --set train.diloco_inner_steps=50 --set train.diloco_fragments=4 --set train.diloco_overlap_steps=5"; do
    name=${row%%|*}
    wanted "$name" || continue
    # shellcheck disable=SC2086
    read -r tps bytes <<<"$(ls_run "$name-$rate" ${row#*|})"
    printf "%-9s %-20s %10s %14s %9.0f%%\n" "$rate" "lockstep $name" "$tps" "$bytes" "$(python3 -c "print(100*$tps/$compute)")"
  done
  if wanted pytorch; then
    p=$(peer_run_ns)
    printf "%-9s %-20s %10s\n" "$rate" "pytorch ddp" "$p"
    p=$(peer_run_ns --powersgd 4)
    printf "%-9s %-20s %10s\n" "$rate" "pytorch powersgd r4" "$p"
  fi
  scripts/cluster.sh down >/dev/null
done
if wanted pytorch; then
  echo "peer: torch 1.13 on OpenBLAS ($(grep -o 'blas=[^ ]*' "$tmp/peer0.log" | cut -d= -f2)), gloo, one bucket"
fi
