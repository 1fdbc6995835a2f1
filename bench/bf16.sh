#!/bin/bash
# bf16 mixed precision (train.precision = bf16) on gpt-small (GPT-2-small's shape on
# bytes, batch 8), in one run with the same compute thread count everywhere: lockstep fp32,
# lockstep bf16 and PyTorch's own bf16 autocast (torch_gpt.py --bf16, Debian's torch on
# OpenBLAS), tokens/s as the median step after warm-up, and the ratios. Prints the machine
# line and oneDNN's ISA (bf16 needs AVX512_BF16 or AMX to be faster than fp32).
# Usage: bench/bf16.sh [steps=6] [threads=2]
# Needs scripts/setup.sh (installs the peer's packages itself when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-6}
THREADS=${2:-2}
source bench/peer_lib.sh
peer_setup
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LS=build/lockstep

machine_line

# One lockstep run: median tokens/s after warm-up. eval.batches=1 keeps validation short.
ls_run() {
  local precision=$1
  $LS train --config configs/gpt-small.toml --steps "$STEPS" --set train.threads="$THREADS" \
    --set train.precision="$precision" --set train.log_every=1 --set eval.batches=1 --set checkpoint.keep=1 \
    --out "$tmp/$precision" >"$tmp/$precision.log" 2>&1 || { cat "$tmp/$precision.log" >&2; exit 1; }
  metrics_median "$tmp/$precision/metrics.jsonl" tokens_per_s
}
fp32=$(ls_run fp32)
bf16=$(ls_run bf16)
isa=$(grep -o 'oneDNN [a-z0-9_]*' "$tmp/bf16.log" | head -1 || true)
pt=$(peer_run "$THREADS" "$PEERS/torch_gpt.py" --bf16 --steps "$STEPS" --layers 12 --embd 768 --heads 12 \
  --block 256 --batch 8)
blas=$(peer_check_blas "$pt")

echo "lockstep bf16 products: ${isa:-unknown}; peer: $(cut -d' ' -f1-2 <<<"$pt"), BLAS $blas, bf16 autocast;" \
  "$THREADS compute thread(s) on every side, gpt-small batch 8, median of steps 4..$STEPS"
python3 - "$fp32" "$bf16" "$(peer_field "$pt" tokens/s)" <<'PY'
import sys
f, b, t = map(float, sys.argv[1:])
print(f"{'run':<24}{'tokens/s':>10}")
print(f"{'lockstep fp32':<24}{f:>10.0f}")
print(f"{'lockstep bf16':<24}{b:>10.0f}   {b/f:.2f}x lockstep fp32")
print(f"{'pytorch bf16 autocast':<24}{t:>10.0f}   lockstep bf16 is {b/t:.2f}x pytorch bf16")
PY
