#!/bin/bash
# Soak test of recovery (issue 6): one gpt-tiny run under the supervisor while this script
# SIGKILLs the whole worker process group KILLS times at random moments (from outside, like
# an OOM killer or a lost node); the run must still finish with the weights_xxh64 of the
# same run left alone. Prints each kill, the restarts the supervisor logged, and both hashes.
# Usage: bench/soak.sh [kills=20] [steps=600] [nproc=2] [backend=threads]  (needs scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
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
