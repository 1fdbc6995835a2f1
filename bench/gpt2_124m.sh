#!/bin/bash
# GPT-2 small (configs/gpt2-124m.toml) starts and trains a few steps on 1 worker and
# on 4 (tp=2,pp=2, and --zero 3): tied head, vocabulary 50257 padded to 50304, context 1024,
# on synthetic GPT-2 token shards (llm.c format, uniform ids < 50257: this checks the
# machinery, not learning). Prints each run's losses and step time and each rank's
# model-state bytes beside the ZeRO paper's accounting of its local parameters (fp32 AdamW:
# 4 bytes params + 4 grads + 8 moments per parameter; ZeRO-3 shards all three over dp).
# Usage: bench/gpt2_124m.sh [steps=2] [batch=4]   (needs scripts/setup.sh first; ~10 GB RAM)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/peer_lib.sh
STEPS=${1:-2}
BATCH=${2:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
machine_line
python3 - "$tmp" <<'PY'
import random, struct, sys, array
rng = random.Random(124)
def shard(path, n):
    tokens = array.array("H", (rng.randrange(50257) for _ in range(n)))
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(tokens.tobytes())
for i in range(2):
    shard(f"{sys.argv[1]}/train_{i:06d}.bin", 200_000)
shard(f"{sys.argv[1]}/val_000000.bin", 50_000)
PY
COMMON=(--config configs/gpt2-124m.toml --steps "$STEPS" --set "data.train=$tmp/train_*.bin"
        --set "data.val=$tmp/val_*.bin" --set "train.batch_size=$BATCH" --set eval.batches=1
        --set "eval.every=$STEPS" --set optim.warmup_steps=1)
run() {
  local name=$1; shift
  /usr/bin/time -f "%M" -o "$tmp/$name.rss" build/lockstep train "${COMMON[@]}" --out "$tmp/$name" "$@" \
    >"$tmp/$name.log" 2>&1 || { echo "$name failed:"; tail -3 "$tmp/$name.log"; exit 1; }
}
run one
run tp2pp2 --nproc 4 --layout tp=2,pp=2
run zero3 --nproc 4 --zero 3
python3 - "$tmp" "$STEPS" "$BATCH" <<'PY'
import json, sys
tmp, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print(f"gpt2-124m (124,475,904 parameters), {steps} steps of {batch} x 1024 tokens")
print(f"{'run':<10}{'losses':<24}{'val_loss':>10}{'step_ms':>10}{'peak RSS MB':>13}  done hash")
for name in ("one", "tp2pp2", "zero3"):
    rows = [json.loads(l) for l in open(f"{tmp}/{name}/metrics.jsonl")]
    losses = " ".join(f"{r['loss']:.4f}" for r in rows if "loss" in r)
    val = next(r["val_loss"] for r in rows if "val_loss" in r)
    ms = [r["step_ms"] for r in rows if "step_ms" in r][-1]
    done = next(r["weights_xxh64"] for r in rows if r.get("event") == "done")
    rss = int(open(f"{tmp}/{name}.rss").read().split()[-1]) / 1024
    print(f"{name:<10}{losses:<24}{val:>10.4f}{ms:>10.0f}{rss:>13.0f}  {done}")
print()
print("model-state bytes per rank (memory rows) vs the formula for the rank's local parameters P:")
print(f"{'run':<10}{'rank':>5}{'P':>12}{'params':>12}{'grads':>12}{'optimizer':>12}{'formula':>12}{'ratio':>8}")
for name, n, zero in (("one", 1, 0), ("tp2pp2", 1, 0), ("zero3", 4, 3)):
    for r in (json.loads(l) for l in open(f"{tmp}/{name}/metrics.jsonl")):
        if r.get("event") != "memory":
            continue
        p = r["parameters"]
        formula = 16 * p if zero == 0 else 16 * p / n
        total = r["params_bytes"] + r["grads_bytes"] + r["optimizer_bytes"]
        print(f"{name:<10}{r['rank']:>5}{p:>12}{r['params_bytes']:>12}{r['grads_bytes']:>12}"
              f"{r['optimizer_bytes']:>12}{formula:>12.0f}{total / formula:>8.3f}")
PY
