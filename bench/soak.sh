#!/bin/bash
# Soak test of recovery: one gpt-tiny run under the supervisor while this script
# SIGKILLs the whole worker process group KILLS times at random moments (from outside, like
# an OOM killer or a lost node); the run must still finish with the weights_xxh64 of the
# same run left alone. Prints each kill, the restarts the supervisor logged, and both hashes.
# Usage: bench/soak.sh [kills=20] [steps=600] [nproc=2] [backend=threads]  (needs scripts/setup.sh)
#
# Elastic mode: bench/soak.sh elastic [losses=10] [steps=6+6*losses]
# One deterministic gpt-tiny run on 4 threads workers under --min-nproc 2 --max-nproc 4 with
# rank 3 lost for good from step 6 (--inject-fault kill:rank=3:step=6:permanent). Each loss
# shrinks the world to 2 (3 cannot split train.det_shards=8); each checkpoint boundary gives
# the lost workers back on probation (4 again), and rank 3 dies again: one loss and one
# return per checkpoint interval. The final weights_xxh64 must equal the uninterrupted
# 4-worker run's, with at least LOSSES losses and LOSSES returns logged as world_changed rows.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/peer_lib.sh

if [ "${1:-}" = elastic ]; then
  LOSSES=${2:-10}
  STEPS=${3:-$((6 + 6 * LOSSES))}
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  machine_line
  args=(train --config configs/gpt-tiny.toml --steps "$STEPS" --nproc 4 --deterministic
        --set checkpoint.every=5 --set checkpoint.keep=2)
  hash_of() { python3 -c "import json,sys;print(json.loads(open(sys.argv[1]).read().splitlines()[-1]).get('weights_xxh64',''))" "$1/metrics.jsonl"; }
  start=$(date +%s)
  build/lockstep "${args[@]}" --out "$tmp/clean" >/dev/null 2>&1
  clean=$(hash_of "$tmp/clean")
  echo "uninterrupted, 4 workers: weights_xxh64 $clean in $(( $(date +%s) - start )) s"
  start=$(date +%s)
  rc=0
  build/lockstep "${args[@]}" --out "$tmp/elastic" --max-restarts $((2 * LOSSES + 20)) --min-nproc 2 --max-nproc 4 \
    --inject-fault kill:rank=3:step=6:permanent >/dev/null 2>"$tmp/elastic.err" || rc=$?
  elastic=$(hash_of "$tmp/elastic")
  read -r shrinks grows <<<"$(python3 - "$tmp/elastic/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
w = [r for r in rows if r.get("event") == "world_changed"]
print(sum(r["to"] < r["from"] for r in w), sum(r["to"] > r["from"] for r in w))
PY
)"
  echo "elastic: $shrinks losses (world -> 2), $grows returns (world -> 4), exit $rc, weights_xxh64 $elastic in $(( $(date +%s) - start )) s"
  grep 'supervisor: world' "$tmp/elastic.err" | head -4
  echo "..."
  grep 'supervisor: world' "$tmp/elastic.err" | tail -2
  if [ "$rc" -eq 0 ] && [ "$elastic" = "$clean" ] && [ "$shrinks" -ge "$LOSSES" ] && [ "$grows" -ge "$LOSSES" ]; then
    echo "PASS: $shrinks permanent losses and $grows returns; the final weights equal the uninterrupted run's"
  else
    echo "FAIL"; exit 1
  fi
  exit 0
fi
KILLS=${1:-20}
STEPS=${2:-600}
NPROC=${3:-2}
BACKEND=${4:-threads}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(train --config configs/gpt-tiny.toml --steps "$STEPS" --nproc "$NPROC" --backend "$BACKEND"
      --set checkpoint.every=5 --set checkpoint.keep=2)
hash_of() { python3 -c "import json,sys;print(json.loads(open(sys.argv[1]).read().splitlines()[-1]).get('weights_xxh64',''))" "$1/metrics.jsonl"; }

start=$(date +%s)
build/lockstep "${args[@]}" --out "$tmp/clean" >/dev/null 2>&1
clean=$(hash_of "$tmp/clean")
echo "uninterrupted: weights_xxh64 $clean in $(( $(date +%s) - start )) s"

start=$(date +%s)
build/lockstep "${args[@]}" --out "$tmp/soak" --max-restarts $((KILLS + 5)) >/dev/null 2>"$tmp/soak.err" &
sup=$!
killed=0
RANDOM=$$
while [ "$killed" -lt "$KILLS" ] && kill -0 "$sup" 2>/dev/null; do
  sleep "$(( 1 + RANDOM % 3 )).$(( RANDOM % 10 ))"   # 1.0 .. 3.9 s
  pid=$(cat "$tmp/soak/worker.pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || continue
  step=$(grep -o '"step":[0-9]*' "$tmp/soak/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2 || true)
  kill -9 -- "-$pid" 2>/dev/null && killed=$((killed + 1)) && echo "kill $killed: SIGKILL to process group $pid (last logged step ${step:-0})"
done
rc=0; wait "$sup" || rc=$?
soak=$(hash_of "$tmp/soak")
restarts=$(grep -c '"event":"restart"' "$tmp/soak/metrics.jsonl" || true)
echo "soak: $killed kills, $restarts restarts logged, exit $rc, weights_xxh64 $soak in $(( $(date +%s) - start )) s"
grep 'supervisor:' "$tmp/soak.err" | tail -3
if [ "$rc" -eq 0 ] && [ "$soak" = "$clean" ] && [ "$killed" -eq "$KILLS" ]; then
  echo "PASS: the final weights equal the uninterrupted run's"
else
  echo "FAIL"; exit 1
fi
