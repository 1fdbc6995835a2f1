#!/bin/bash
# Does lockstep learn as well as the PyTorch peer? Same recipe, same data, one run:
# - gpt-tiny, 300 steps (AdamW, warmup 20 + cosine to 1e-4, clip 1.0, batch 16 x 128), the
#   validation loss over the WHOLE held-out 10% of the fortunes corpus (eval.batches = 0) beside
#   torch_gpt.py --corpus with the same recipe (its val_loss is over the whole split too).
# - llama-tiny, the same 300 steps and recipe, beside torch_llama.py. That peer samples its
#   windows from the whole corpus and prints no validation loss, so it is given lockstep's train
#   split alone (the first 90% of the same bytes, as one file), saves its weights in Hugging
#   Face's layout (--save-hf), and lockstep evaluates them on the whole validation split: both
#   losses are lockstep's evaluation of the same windows. (The import runs one step at lr 1e-30,
#   which changes no fp32 weight.)
# - cnn-fashion, 5 epochs, test accuracy over the 10k test images beside torch_cnn.py. Not the
#   same schedule: the peer keeps AdamW's lr at 2e-3 and draws one permutation for all epochs,
#   lockstep follows configs/cnn-fashion.toml (cosine to 1e-4, reshuffled every epoch).
# Data order and initial weights come from different random streams, so the losses agree only
# to a run-to-run spread (a few 0.01 for gpt-tiny after 300 steps).
# Usage: bench/learning.sh [gpt_steps=300] [cnn_epochs=5] [threads=1]
set -euo pipefail
cd "$(dirname "$0")/.."
GPT_STEPS=${1:-300}
CNN_EPOCHS=${2:-5}
THREADS=${3:-1}
source bench/peer_lib.sh
peer_setup
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
machine_line

build/lockstep train --config configs/gpt-tiny.toml --steps "$GPT_STEPS" --set train.threads="$THREADS" \
  --set eval.batches=0 --set eval.every="$GPT_STEPS" --out "$tmp/gpt" >/dev/null 2>&1
ls_gpt=$(metrics_last "$tmp/gpt/metrics.jsonl" val_loss)
pt_gpt=$(peer_run "$THREADS" "$PEERS/torch_gpt.py" --steps "$GPT_STEPS" --corpus /usr/share/games/fortunes)
blas=$(peer_check_blas "$pt_gpt")

build/lockstep train --config configs/llama-tiny.toml --steps "$GPT_STEPS" --set train.threads="$THREADS" \
  --set eval.batches=0 --set eval.every="$GPT_STEPS" --out "$tmp/llama" >/dev/null 2>&1
ls_llama=$(metrics_last "$tmp/llama/metrics.jsonl" val_loss)
mkdir -p "$tmp/train_split"
python3 - /usr/share/games/fortunes "$tmp/train_split/train" <<'PY'
import os, sys
d = sys.argv[1]
names = sorted(n for n in os.listdir(d) if '.' not in n and not os.path.islink(os.path.join(d, n))
               and os.path.isfile(os.path.join(d, n)))
data = b''.join(open(os.path.join(d, n), 'rb').read() for n in names)
open(sys.argv[2], 'wb').write(data[:int(len(data) * 0.9)])
PY
pt_llama=$(peer_run "$THREADS" "$PEERS/torch_llama.py" --steps "$GPT_STEPS" --corpus "$tmp/train_split" \
  --save-hf "$tmp/peer_hf")
peer_check_blas "$pt_llama" >/dev/null
build/lockstep train --config configs/llama-tiny.toml --steps 1 --init-from "hf:$tmp/peer_hf" \
  --set optim.lr=1e-30 --set optim.min_lr=0 --set train.threads="$THREADS" --set eval.batches=0 \
  --out "$tmp/peer_eval" >/dev/null 2>&1
pt_llama_val=$(metrics_last "$tmp/peer_eval/metrics.jsonl" val_loss)

build/lockstep train --config configs/cnn-fashion.toml --epochs "$CNN_EPOCHS" --set train.threads="$THREADS" \
  --set eval.every=0 --out "$tmp/cnn" >/dev/null 2>&1
ls_cnn=$(metrics_last "$tmp/cnn/metrics.jsonl" val_acc)
pt_cnn=$(peer_run "$THREADS" "$PEERS/torch_cnn.py" --epochs "$CNN_EPOCHS")
peer_check_blas "$pt_cnn" >/dev/null

echo "peer: torch on $blas"
printf "%-40s %10s %10s\n" "" lockstep pytorch
printf "%-40s %10.4f %10.4f\n" "gpt-tiny $GPT_STEPS steps: val_loss (whole split)" "$ls_gpt" "$(peer_field "$pt_gpt" val_loss)"
printf "%-40s %10.4f %10.4f\n" "llama-tiny $GPT_STEPS steps: val_loss (whole split)" "$ls_llama" "$pt_llama_val"
printf "%-40s %10.4f %10.4f\n" "cnn-fashion $CNN_EPOCHS epochs: test accuracy" "$ls_cnn" "$(peer_field "$pt_cnn" test_acc)"
