#!/bin/bash
# lockstep under a real Slurm (Debian's slurmctld + slurmd + munge, scripts/slurm-cluster.sh)
# on two emulated hosts, each slurmd in its host's network and UTS namespace:
#  - srun --mpi=pmix, one task a node running 2 workers: the 1-worker weights_xxh64;
#  - examples/slurm/train.sbatch (2 nodes x 2 tasks, one lockstep process a node started by
#    mpirun through Slurm): mid-run node 1's slurmd, job step and workers are killed; the job
#    finishes on node 0 with the same weights_xxh64, the world changed from 4 to 2 workers;
#  - `plan` in salloc's shell: the allocation's nodes are its hosts;
#  - plain srun without an MPI plugin, and a malformed node list: one line, exit 2.
# Needs root, network namespaces and Slurm: skips without them, fails under LOCKSTEP_CI=1.
# Usage: slurm_test.sh SOURCE_DIR LOCKSTEP_BINARY
set -uo pipefail
SRC=$1
BIN=$2
export LOCKSTEP_CLUSTER_NAME=lsslurm$$
export LOCKSTEP_CLUSTER_SUBNET=10.216.0
export LOCKSTEP_CLUSTER_DIR=$(mktemp -d)/cluster
export LOCKSTEP_SLURM_DIR=/var/tmp/$LOCKSTEP_CLUSTER_NAME-slurm
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
S=$SRC/scripts/slurm-cluster.sh
H=$LOCKSTEP_CLUSTER_NAME-h
. "$SRC/tests/scripts/checks.sh"
need_namespaces "${H}probe"
for tool in slurmctld slurmd srun munged; do command -v $tool >/dev/null || missing "$tool (scripts/setup.sh installs Slurm)"; done
work=$(mktemp -d -t lockstep-slurm-test.XXXXXX)
trap '"$S" down >/dev/null 2>&1; rm -rf "$work" "$(dirname "$LOCKSTEP_CLUSTER_DIR")"' EXIT

hash_of() { sed -n 's/.*weights_xxh64 \([0-9a-f]\{16\}\).*/\1/p' "$1" | tail -n 1; }
# Waits for Slurm job $1 to leave the queue (at most $2 seconds).
wait_job() {
  local i
  for ((i = 0; i < $2 * 2; i++)); do
    [ -z "$("$S" run squeue -h -j "$1" 2>/dev/null)" ] && return 0
    sleep 0.5
  done
  echo "      job $1 still in the queue after $2 s"
  return 1
}

cd "$SRC"
flags=(--config configs/gpt-tiny.toml --steps 40 --deterministic --set checkpoint.every=4 --set checkpoint.keep=3)
"$BIN" train "${flags[@]}" --set train.threads=1 --nproc 1 --out "$work/ref" >"$work/ref.log" 2>&1
want=$(hash_of "$work/ref.log")
check "reference run (1 worker) has a hash" test ${#want} -eq 16

"$S" up 2 >"$work/up.log" 2>&1 || { cat "$work/up.log"; echo "FAIL  slurm-cluster.sh up 2"; exit 1; }
echo "ok    Slurm up: $("$S" run sinfo -h -o '%D nodes %t')"

# srun, one task a node, each running 2 of the 4 workers as threads.
"$S" run timeout 300 srun --mpi=pmix -N2 --ntasks-per-node=1 --cpus-per-task=2 -D "$SRC" \
  "$BIN" train "${flags[@]}" --nproc 4 --out "$work/srun" >"$work/srun.log" 2>&1
check "srun --mpi=pmix, 2 nodes x 2 workers: exit 0" test $? -eq 0
check "srun: 4 workers, backend hier" grep -q "on 4 worker(s), backend hier" "$work/srun.log"
check "srun: the 1-worker hash" test "$(hash_of "$work/srun.log")" = "$want"

# bench-comm across the allocation's nodes (mpirun through Slurm, --mpi-if found on their subnet).
out=$("$S" run timeout 120 salloc -N2 --ntasks-per-node=2 "$BIN" bench-comm --hosts "${H}0:2,${H}1:2" \
  --min-bytes 1K --max-bytes 1M 2>&1)
check "bench-comm --hosts: 4 ranks, backend hier" grep -q "allreduce, backend hier, 4 ranks" <<<"$out"
check "  every value right" grep -q "Out of bounds values : 0 OK" <<<"$out"

# plan inside the allocation: its nodes are the hosts (a two-block gpt-tiny: seconds).
out=$("$S" run timeout 180 salloc -N2 --ntasks-per-node=1 sh -c "cd '$SRC' && '$BIN' plan --config configs/gpt-tiny.toml \
  --set model.layers=2 --set model.context=32 --set train.batch_size=4 --out '$work/plan'" 2>&1)
grep -q "^gpt, 2 workers on 2 hosts (hier backend)" <<<"$out" || tail -5 <<<"$out"
check "salloc: plan takes the allocation's 2 nodes as its hosts" grep -q "^gpt, 2 workers on 2 hosts (hier backend)" <<<"$out"

# Bad input: one line, exit 2.
out=$("$S" run timeout 60 srun -N2 -n2 -D "$SRC" "$BIN" train "${flags[@]}" --out "$work/nompi" 2>&1)
check "srun without an MPI plugin: refused, naming --mpi=pmix" grep -q "start them with srun --mpi=pmix" <<<"$out"
check "  and every task exits 2" test "$(grep -c 'Exited with exit code 2' <<<"$out")" -eq 2
out=$(SLURM_JOB_ID=7 SLURM_JOB_NODELIST='node[01-' "$BIN" train "${flags[@]}" --out "$work/bad" 2>&1)
code=$?
check "a malformed node list: one line, exit 2" \
  test "$code:$out" = "2:lockstep: error: Slurm node list \"node[01-\": unclosed '['"

# The example batch script; node 1 is lost once the job has committed step 8. Node 1's first
# worker runs 5x slower in the first attempt (a sleep; the numbers are the same), so the job
# is still running then.
job=$("$S" run env LOCKSTEP="$BIN" sbatch --parsable -D "$SRC" -o "$work/batch.log" \
  "$SRC/examples/slurm/train.sbatch" "${flags[@]}" --heartbeat-timeout 20 \
  --inject-fault slow:rank=2:factor=5 --out "$work/batch")
check "sbatch examples/slurm/train.sbatch: submitted" test -n "$job"
lost=no
for ((i = 0; i < 1200; i++)); do
  if [ -d "$work/batch/checkpoints/step-00000008" ]; then
    ip netns pids "${H}1" | xargs -r kill -9  # slurmd, the job step, the workers: the node is gone
    lost=yes
    break
  fi
  if ((i % 20 == 19)) && [ -z "$("$S" run squeue -h -j "$job" 2>/dev/null)" ]; then break; fi
  sleep 0.1
done
check "node 1 killed mid-run" test $lost = yes
check "the job ends" wait_job "$job" 300
check "batch: the 1-worker hash after losing a node" test "$(hash_of "$work/batch.log")" = "$want"
changed=$(grep '"world_changed"' "$work/batch/metrics.jsonl" 2>/dev/null)
check "batch: the world went from 4 workers to 2" grep -q '"from":4,.*"to":2' <<<"$changed"
check "  because node 1 no longer answers srun" grep -q "host ${H}1 does not answer (\`srun " <<<"$changed"
if [ $failures -gt 0 ]; then
  for f in srun.log batch.log; do echo "--- $f"; tail -n 40 "$work/$f"; done
  echo "--- Slurm logs"
  tail -n 20 "$LOCKSTEP_SLURM_DIR"/log/*.log
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
