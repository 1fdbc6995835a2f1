#!/bin/bash
# Per-rank parameter + gradient + optimizer-state bytes under ZeRO (issue 7) on 4 workers,
# from each run's metrics.jsonl "memory" row (parameters and gradients as lockstep's
# allocator counts them, optimizer state from the owned range, peak activation tensors), beside the ZeRO paper's accounting for fp32
# Adam with Ψ parameters (16Ψ unsharded; stage 1: 8Ψ + 8Ψ/N; stage 2: 4Ψ + 12Ψ/N;
# stage 3: 16Ψ/N). Only the stages lockstep has are run.
# Usage: bench/zero_memory.sh [nproc=4]   (needs scripts/setup.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for z in 0 1; do
  build/lockstep train --config configs/gpt-tiny.toml --steps 2 --nproc "$N" --zero "$z" \
    --set eval.batches=1 --out "$tmp/z$z" >/dev/null 2>&1
done
python3 - "$tmp" "$N" <<'PY'
import json, sys
tmp, n = sys.argv[1], int(sys.argv[2])
print(f"gpt-tiny, {n} workers, fp32 AdamW; bytes per rank (rank 0)")
print(f"{'zero':<6}{'params':>12}{'grads':>12}{'optimizer':>12}{'total':>12}{'paper':>12}{'ratio':>8}{'peak act.':>12}")
for z in (0, 1):
    row = next(json.loads(l) for l in open(f"{tmp}/z{z}/metrics.jsonl") if '"memory"' in l)
    psi = row["parameters"]
    paper = {0: 16 * psi, 1: 8 * psi + 8 * psi / n}[z]
    total = row["params_bytes"] + row["grads_bytes"] + row["optimizer_bytes"]
    print(f"{z:<6}{row['params_bytes']:>12}{row['grads_bytes']:>12}{row['optimizer_bytes']:>12}{total:>12}{paper:>12.0f}{total/paper:>8.3f}{row['peak_activation_bytes']:>12}")
PY
