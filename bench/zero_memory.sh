#!/bin/bash
# ZeRO memory, two tables from one run:
# 1. Per-rank parameter + gradient + optimizer-state bytes of gpt-tiny on 4 workers for
#    --zero 0..3, from each run's metrics.jsonl "memory" row (as the rank's MemoryTracker
#    counts them after a step), beside the ZeRO paper's accounting for fp32 Adam with Ψ
#    parameters: 16Ψ unsharded; stage 1 8Ψ + 8Ψ/N; stage 2 4Ψ + 12Ψ/N; stage 3 16Ψ/N.
# 2. --mem-limit: a wider GPT whose unsharded run needs several times the limit (peak bytes
#    of one worker, measured without a limit) trains with --zero 3 on 4 workers under it,
#    while --zero 0 and --zero 1 are refused (exit status 2) under the same limit.
# Usage: bench/zero_memory.sh [nproc=4]   (needs scripts/setup.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for z in 0 1 2 3; do
  build/lockstep train --config configs/gpt-tiny.toml --steps 2 --nproc "$N" --zero "$z" \
    --set eval.batches=1 --out "$tmp/z$z" >/dev/null 2>&1
done
python3 - "$tmp" "$N" <<'PY'
import json, sys
tmp, n = sys.argv[1], int(sys.argv[2])
print(f"gpt-tiny, {n} workers, fp32 AdamW; model-state bytes per rank (rank 0) vs the ZeRO paper")
print(f"{'zero':<6}{'params':>12}{'grads':>12}{'optimizer':>12}{'total':>12}{'paper':>12}{'ratio':>8}{'peak all':>12}")
for z in (0, 1, 2, 3):
    # rank 0's last memory row (the end of the run; earlier ones follow the first step)
    row = [r for r in map(json.loads, open(f"{tmp}/z{z}/metrics.jsonl")) if r.get("event") == "memory" and r["rank"] == 0][-1]
    psi = row["parameters"]
    paper = {0: 16 * psi, 1: 8 * psi + 8 * psi / n, 2: 4 * psi + 12 * psi / n, 3: 16 * psi / n}[z]
    total = row["params_bytes"] + row["grads_bytes"] + row["optimizer_bytes"]
    print(f"{z:<6}{row['params_bytes']:>12}{row['grads_bytes']:>12}{row['optimizer_bytes']:>12}{total:>12}"
          f"{paper:>12.0f}{total/paper:>8.3f}{row['peak_bytes']:>12}")
PY

# --mem-limit: width 256, 8 layers (6.5M parameters), 8 x 64-token batches.
WIDE=(--config configs/gpt-tiny.toml --steps 3 --set model.width=256 --set model.layers=8 --set model.heads=4
      --set model.context=64 --set train.batch_size=8 --set eval.batches=1)
peak() { python3 -c "import json,sys;print([r for r in map(json.loads,open(sys.argv[1])) if r.get('event')=='memory' and r['rank']==0][-1]['peak_bytes'])" "$1"; }
build/lockstep train "${WIDE[@]}" --out "$tmp/one" >/dev/null 2>&1
build/lockstep train "${WIDE[@]}" --nproc "$N" --zero 3 --out "$tmp/z3free" >/dev/null 2>&1
one=$(peak "$tmp/one/metrics.jsonl")
z3=$(peak "$tmp/z3free/metrics.jsonl")
limit_mib=$(( (z3 + 1048575) / 1048576 + 1 ))   # the ZeRO-3 worker's peak, rounded up, + 1 MiB
status() { build/lockstep train "${WIDE[@]}" --mem-limit "${limit_mib}M" --out "$tmp/$1" "${@:2}" >"$tmp/$1.out" 2>"$tmp/$1.err" && echo "trained" || echo "exit $? ($(tail -1 "$tmp/$1.err" | cut -c1-90)...)"; }
echo
echo "--mem-limit ${limit_mib}M: GPT width 256, 8 layers, 6.5M parameters, batch 8 x 64"
printf '%-34s %s\n' "one worker needs (peak, no limit)" "$(python3 -c "print(f'{$one/1048576:.1f} MiB = {$one/($limit_mib*1048576):.2f}x the limit')")"
printf '%-34s %s\n' "--zero 3 worker peak (no limit)" "$(python3 -c "print(f'{$z3/1048576:.1f} MiB')")"
printf '%-34s %s\n' "--nproc 1" "$(status one1)"
printf '%-34s %s\n' "--nproc $N (data parallel)" "$(status dp --nproc "$N")"
printf '%-34s %s\n' "--nproc $N --zero 1" "$(status z1 --nproc "$N" --zero 1)"
printf '%-34s %s\n' "--nproc $N --zero 3" "$(status z3 --nproc "$N" --zero 3)"
