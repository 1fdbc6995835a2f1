#!/bin/bash
# Parallel layouts, in one run:
# 1. Step time of gpt-tiny under every layout of 4 workers (one compute thread each), beside
#    the data-parallel dp=4 baseline: median step_ms after warm-up, tokens/s and the ratio.
# 2. The pipeline bubble: pp=2 (2 workers, one thread each) on an 8-layer gpt-tiny with a
#    64-sequence batch, 1F1B with m = 2, 4, 8 micro-batches; measured idle share of the
#    busiest stage and the mean over stages, against (p-1)/(m+p-1).
# Usage: bench/layouts.sh [steps=20]    (needs scripts/setup.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

LAYOUTS=("dp=4" "dp=4 --zero 1" "dp=4 --zero 2" "dp=4 --zero 3" "tp=2,dp=2" "pp=2,dp=2" "tp=2,pp=2" "pp=4" "tp=4")
i=0
for l in "${LAYOUTS[@]}"; do
  # shellcheck disable=SC2086
  build/lockstep train --config configs/gpt-tiny.toml --steps "$STEPS" --nproc 4 --layout $l \
    --set train.threads=1 --set eval.batches=1 --out "$tmp/l$i" >/dev/null 2>&1
  i=$((i + 1))
done
python3 - "$tmp" "${LAYOUTS[@]}" <<'PY'
import json, statistics, sys
tmp, layouts = sys.argv[1], sys.argv[2:]
def med(i, f):
    rows = [json.loads(l) for l in open(f"{tmp}/l{i}/metrics.jsonl") if '"loss"' in l][3:]
    return statistics.median(r[f] for r in rows)
base = med(0, "step_ms")
print("gpt-tiny, 4 workers x 1 compute thread (threads backend), median over steps after warm-up")
print(f"{'layout':<18}{'step ms':>10}{'tokens/s':>10}{'vs dp=4':>9}")
for i, l in enumerate(layouts):
    ms = med(i, "step_ms")
    print(f"{l:<18}{ms:>10.1f}{med(i, 'tokens_per_s'):>10.0f}{ms / base:>8.2f}x")
PY

echo
for m in 2 4 8; do
  build/lockstep train --config configs/gpt-tiny.toml --steps 10 --nproc 2 --layout pp=2 --set train.threads=1 \
    --set model.layers=8 --set train.batch_size=64 --set train.pp_microbatches="$m" --set eval.batches=1 \
    --out "$tmp/pp$m" >/dev/null 2>&1
done
python3 - "$tmp" <<'PY'
import json, statistics, sys
tmp = sys.argv[1]
print("pipeline bubble: pp=2, 1F1B, gpt-tiny with 8 layers, batch 64 x 128 tokens, 1 thread per stage")
print(f"{'m':>3}{'formula':>10}{'bottleneck':>12}{'ratio':>7}{'mean':>8}{'ratio':>7}{'stage busy ms':>18}")
for m in (2, 4, 8):
    rows = [json.loads(l) for l in open(f"{tmp}/pp{m}/metrics.jsonl") if '"pp_bubble"' in l][3:]
    f = rows[0]["pp_bubble_formula"]
    b = statistics.median(r["pp_bubble_bottleneck"] for r in rows)
    a = statistics.median(r["pp_bubble"] for r in rows)
    busy = [statistics.median(r["pp_busy_ms"][s] for r in rows) for s in range(2)]
    print(f"{m:>3}{f:>10.3f}{b:>12.3f}{b/f:>7.2f}{a:>8.3f}{a/f:>7.2f}{busy[0]:>9.0f}{busy[1]:>9.0f}")
PY
