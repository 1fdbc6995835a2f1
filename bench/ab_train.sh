#!/bin/bash
# Two builds of lockstep against each other on one workload: the binaries alternate, ROUNDS
# times each, and every run prints its median tokens (or samples) per second and GFLOP/s after
# step 2; then the median of the pairwise ratios (B over A). This VM's speed drifts by more than
# a kernel change is worth, so a change is judged by runs taken in turns, not by two runs apart.
# A build of an older commit: git worktree add /work/old REV && cmake -S /work/old -B
# /work/old/build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build /work/old/build --target lockstep
# Usage: bench/ab_train.sh A_BINARY B_BINARY CONFIG [steps=40] [rounds=3] [--set k=v ...]
# e.g.   bench/ab_train.sh /work/old/build/lockstep build/lockstep configs/gpt-tiny.toml 40 3 --set train.threads=1
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then echo "usage: bench/ab_train.sh A_BINARY B_BINARY CONFIG [steps] [rounds] [--set k=v ...]" >&2; exit 2; fi
A=$1; B=$2; CFG=$3; shift 3
STEPS=40; ROUNDS=3
if [ $# -gt 0 ] && [[ $1 != --* ]]; then STEPS=$1; shift; fi
if [ $# -gt 0 ] && [[ $1 != --* ]]; then ROUNDS=$1; shift; fi
source bench/peer_lib.sh
machine_line
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # run BINARY NAME [train options] -> "NAME tokens/s GFLOP/s"
  local bin=$1 name=$2 d="$tmp/run"
  shift 2
  rm -rf "$d"
  "$bin" train --config "$CFG" --steps "$STEPS" --out "$d" --set eval.batches=1 "$@" >/dev/null 2>&1 || { echo "$name FAILED"; return; }
  python3 - "$d/metrics.jsonl" "$name" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
key = "tokens_per_s" if any("tokens_per_s" in r for r in rows) else "samples_per_s"
v = [r[key] for r in rows if key in r and r.get("step", 0) > 2]
g = [r["gflops"] for r in rows if "gflops" in r and r.get("step", 0) > 2]
print(sys.argv[2], round(statistics.median(v)), round(statistics.median(g), 1))
PY
}
results=()
for i in $(seq "$ROUNDS"); do
  a=$(run "$A" A "$@"); echo "round $i: $a"
  b=$(run "$B" B "$@"); echo "round $i: $b"
  results+=("$a" "$b")
done
printf '%s\n' "${results[@]}" | python3 -c "
import sys, statistics
rows = [l.split() for l in sys.stdin if l.strip() and 'FAILED' not in l]
a = [float(r[1]) for r in rows if r[0] == 'A']; b = [float(r[1]) for r in rows if r[0] == 'B']
ratios = [y / x for x, y in zip(a, b)]
print(f'B over A, rounds taken in turns: median {statistics.median(ratios):.3f} (' + ', '.join(f'{r:.3f}' for r in ratios) + ')')
"
