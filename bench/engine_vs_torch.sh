#!/bin/bash
# One worker against the PyTorch peer (Debian's torch on OpenBLAS), in one run, with the same
# compute thread count on both sides: tokens/s (gpt-tiny) and images/s (cnn-fashion), peak
# RSS of each process, and lockstep's achieved GFLOP/s of the training step (causal attention
# counted as the kernel computes it) against dnnl_sgemm's peak measured in the same run.
# The peer's BLAS is printed and must be OpenBLAS (the benchmark fails otherwise).
# Usage: bench/engine_vs_torch.sh [gpt_steps=40] [cnn_steps=200] [threads=1]
# Needs scripts/setup.sh (installs the peer's packages itself when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
GPT_STEPS=${1:-40}
CNN_STEPS=${2:-200}
THREADS=${3:-1}
source bench/peer_lib.sh
peer_setup
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LS=build/lockstep

machine_line

# lockstep: median tokens|images/s and GFLOP/s after warm-up, and the process's peak RSS.
ls_gpt_rss=$(rss_run $LS train --config configs/gpt-tiny.toml --steps "$GPT_STEPS" --set train.threads="$THREADS" \
  --set eval.batches=1 --set checkpoint.keep=1 --out "$tmp/gpt")
ls_tok=$(metrics_median "$tmp/gpt/metrics.jsonl" tokens_per_s)
ls_gflops=$(metrics_median "$tmp/gpt/metrics.jsonl" gflops)
ls_cnn_rss=$(rss_run $LS train --config configs/cnn-fashion.toml --steps "$CNN_STEPS" --set train.threads="$THREADS" \
  --set eval.batches=1 --set checkpoint.keep=1 --out "$tmp/cnn")
ls_img=$(metrics_median "$tmp/cnn/metrics.jsonl" samples_per_s)
cnn_gflops=$(metrics_median "$tmp/cnn/metrics.jsonl" gflops)

pt_gpt=$(peer_run "$THREADS" "$PEERS/torch_gpt.py" --steps "$GPT_STEPS")
blas=$(peer_check_blas "$pt_gpt")
epochs=$(python3 -c "print($CNN_STEPS*64/60000)")
pt_cnn=$(peer_run "$THREADS" "$PEERS/torch_cnn.py" --epochs "$epochs")
peer_check_blas "$pt_cnn" >/dev/null

peak=$(OMP_NUM_THREADS=$THREADS build/gemm_bench --benchmark_filter='^dnnl_sgemm/M:1024/N:1024/K:1024' \
  --benchmark_format=json 2>/dev/null |
  python3 -c "import json,sys; print(max(b['GFLOP/s'] for b in json.load(sys.stdin)['benchmarks']) / 1e9)")

echo "peer: $(head -c 60 <<<"$pt_gpt" | cut -d' ' -f1-2), BLAS $blas; $THREADS compute thread(s) on both sides"
python3 - "$ls_tok" "$(peer_field "$pt_gpt" tokens/s)" "$ls_img" "$(peer_field "$pt_cnn" images/s)" \
  "$ls_gpt_rss" "$(peer_field "$pt_gpt" peak_rss_kb)" "$ls_cnn_rss" "$(peer_field "$pt_cnn" peak_rss_kb)" \
  "$ls_gflops" "$cnn_gflops" "$peak" <<'PY'
import sys
lt, pt, li, pi, lgr, pgr, lcr, pcr, lg, cg, peak = map(float, sys.argv[1:])
print(f"{'workload':<14}{'lockstep':>14}{'pytorch':>14}{'ratio':>8}{'RSS lockstep':>15}{'RSS pytorch':>13}{'ratio':>7}")
print(f"{'gpt-tiny':<14}{lt:>10.0f} t/s{pt:>10.0f} t/s{lt/pt:>7.2f}x{lgr/1024:>11.0f} MiB{pgr/1024:>9.0f} MiB{lgr/pgr:>6.2f}x")
print(f"{'cnn-fashion':<14}{li:>10.0f} i/s{pi:>10.0f} i/s{li/pi:>7.2f}x{lcr/1024:>11.0f} MiB{pcr/1024:>9.0f} MiB{lcr/pcr:>6.2f}x")
print(f"achieved GFLOP/s of the training step: gpt-tiny {lg:.1f}, cnn-fashion {cg:.1f}; "
      f"dnnl_sgemm 1024^3 peak {peak:.1f} -> {100*lg/peak:.0f}% / {100*cg/peak:.0f}% of peak")
PY
