#!/bin/bash
# Data-parallel scaling, one compute thread per worker, in one run: throughput at
# --nproc 1 and 2 -> scaling efficiency, and the exposed (not overlapped) communication share
# of the step; beside it the PyTorch DDP/gloo peer (torch on OpenBLAS, checked) measured the
# same way. Both scale strongly: the global batch (16 sequences) is split over the workers.
# Usage: bench/scaling.sh [gpt_steps] [cnn_steps] [backend]    (needs scripts/setup.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
GPT_STEPS=${1:-40}
CNN_STEPS=${2:-200}
BACKEND=${3:-threads}
source bench/peer_lib.sh
peer_setup
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

stat() {  # median of field $2 (or of $2/$3) over training lines after warm-up
  python3 - "$@" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if "loss" in r][3:]
f = sys.argv[2]; d = sys.argv[3] if len(sys.argv) > 3 else None
print(statistics.median(r[f] / r[d] if d else r[f] for r in rows))
PY
}

run() {  # config steps nproc field
  build/lockstep train --config "configs/$1.toml" --steps "$2" --nproc "$3" --backend "$BACKEND" \
    --set train.threads=1 --set eval.batches=1 --out "$tmp/$1-$3" >/dev/null 2>&1
}

run gpt-tiny "$GPT_STEPS" 1; run gpt-tiny "$GPT_STEPS" 2
run cnn-fashion "$CNN_STEPS" 1; run cnn-fashion "$CNN_STEPS" 2
g1=$(stat "$tmp/gpt-tiny-1/metrics.jsonl" tokens_per_s); g2=$(stat "$tmp/gpt-tiny-2/metrics.jsonl" tokens_per_s)
gx=$(stat "$tmp/gpt-tiny-2/metrics.jsonl" exposed_comm_ms step_ms)
c1=$(stat "$tmp/cnn-fashion-1/metrics.jsonl" samples_per_s); c2=$(stat "$tmp/cnn-fashion-2/metrics.jsonl" samples_per_s)
cx=$(stat "$tmp/cnn-fashion-2/metrics.jsonl" exposed_comm_ms step_ms)

peer1=$(peer_run 1 "$PEERS/torch_gpt.py" --steps "$GPT_STEPS")
blas=$(peer_check_blas "$peer1")
peer2=$(env $(peer_env 1) N=2 bash "$PEERS/torch_ddp.sh" --threads 1 --steps "$GPT_STEPS" 2>/dev/null)
peer_check_blas "$peer2" >/dev/null
p1=$(peer_field "$peer1" tokens/s)
p2=$(peer_field "$peer2" tokens/s)
machine_line
echo "peer: torch DDP/gloo on $blas, global batch 16 split over the processes"

python3 - "$g1" "$g2" "$gx" "$c1" "$c2" "$cx" "$p1" "$p2" "$BACKEND" <<'PY'
import sys
g1, g2, gx, c1, c2, cx, p1, p2 = map(float, sys.argv[1:9])
print(f"backend {sys.argv[9]}, 1 compute thread per worker")
print(f"{'workload':<14}{'nproc 1':>12}{'nproc 2':>12}{'efficiency':>12}{'exposed comm':>14}")
print(f"{'gpt-tiny':<14}{g1:>8.0f} t/s{g2:>8.0f} t/s{100*g2/(2*g1):>11.0f}%{100*gx:>13.1f}%")
print(f"{'cnn-fashion':<14}{c1:>8.0f} i/s{c2:>8.0f} i/s{100*c2/(2*c1):>11.0f}%{100*cx:>13.1f}%")
print(f"{'torch DDP gpt':<14}{p1:>8.0f} t/s{p2:>8.0f} t/s{100*p2/(2*p1):>11.0f}%")
PY
