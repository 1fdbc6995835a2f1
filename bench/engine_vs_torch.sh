#!/bin/bash
# Single-worker speed of lockstep against the PyTorch peer, one compute thread each, in one
# run (issue 3). Prints tokens/s (gpt-tiny) and images/s (cnn-fashion) for both and their
# ratio, and lockstep's achieved GFLOP/s of the training step against dnnl_sgemm's peak
# measured in the same run.
# Usage: bench/engine_vs_torch.sh [gpt_steps] [cnn_steps]
# Needs scripts/setup.sh and Debian python3-torch (the peers run under /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
GPT_STEPS=${1:-40}
CNN_STEPS=${2:-200}
PEERS=${PEERS:-../shared/peers}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Median of a metrics.jsonl field over training lines, skipping the first 3 (warm-up).
median() {
  python3 - "$1" "$2" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
vals = [r[sys.argv[2]] for r in rows if "loss" in r and sys.argv[2] in r][3:]
print(statistics.median(vals))
PY
}

build/lockstep train --config configs/gpt-tiny.toml --steps "$GPT_STEPS" --set train.threads=1 \
  --set eval.batches=1 --set checkpoint.keep=1 --out "$tmp/gpt" >/dev/null 2>&1
ls_tok=$(median "$tmp/gpt/metrics.jsonl" tokens_per_s)
ls_gflops=$(median "$tmp/gpt/metrics.jsonl" gflops)
pt_gpt=$(/usr/bin/python3 "$PEERS/torch_gpt.py" --threads 1 --steps "$GPT_STEPS")
pt_tok=$(sed -n 's/.*tokens\/s=\([0-9.]*\).*/\1/p' <<<"$pt_gpt")

build/lockstep train --config configs/cnn-fashion.toml --steps "$CNN_STEPS" --set train.threads=1 \
  --set eval.batches=1 --set checkpoint.keep=1 --out "$tmp/cnn" >/dev/null 2>&1
ls_img=$(median "$tmp/cnn/metrics.jsonl" samples_per_s)
cnn_gflops=$(median "$tmp/cnn/metrics.jsonl" gflops)
epochs=$(python3 -c "print($CNN_STEPS*64/60000)")
pt_cnn=$(/usr/bin/python3 "$PEERS/torch_cnn.py" --threads 1 --epochs "$epochs")
pt_img=$(sed -n 's/.*images\/s=\([0-9.]*\).*/\1/p' <<<"$pt_cnn")

peak=$(OMP_NUM_THREADS=1 build/gemm_bench --benchmark_filter='^dnnl_sgemm/M:1024/N:1024/K:1024' --benchmark_format=json 2>/dev/null |
  python3 -c "import json,sys; print(max(b['GFLOP/s'] for b in json.load(sys.stdin)['benchmarks']) / 1e9)")

python3 - "$ls_tok" "$pt_tok" "$ls_img" "$pt_img" "$ls_gflops" "$cnn_gflops" "$peak" <<'PY'
import sys
lt, pt, li, pi, lg, cg, peak = map(float, sys.argv[1:])
print(f"{'workload':<14}{'lockstep':>14}{'pytorch':>14}{'ratio':>8}")
print(f"{'gpt-tiny':<14}{lt:>10.0f} t/s{pt:>10.0f} t/s{lt/pt:>7.2f}x")
print(f"{'cnn-fashion':<14}{li:>10.0f} i/s{pi:>10.0f} i/s{li/pi:>7.2f}x")
print(f"achieved GFLOP/s of the training step (1 thread): gpt-tiny {lg:.1f}, cnn-fashion {cg:.1f}; "
      f"dnnl_sgemm 1024^3 peak {peak:.1f} -> {100*lg/peak:.0f}% / {100*cg/peak:.0f}%")
PY
