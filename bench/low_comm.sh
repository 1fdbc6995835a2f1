#!/bin/bash
# What PowerSGD and DiLoCo cost in loss and save in bytes (issue 41, learning half; one machine).
# gpt-tiny (its recipe: AdamW, warmup 20 + cosine to 1e-4, clip 1.0, global batch 16 x 128) on
# 4 workers for S steps (default 2000), the same global batch and tokens in every row; the
# validation loss over the WHOLE held-out split and the bytes rank 0 sent over the whole run
# (the sum of its comm_bytes rows: what the ring algorithm of each collective sends,
# comm/counting_communicator.h). Rows: synchronous data parallelism, PowerSGD rank 1, 4, 16
# (uncompressed for the first 10 steps, as PyTorch's start_powerSGD_iter), DiLoCo H = 10, 50,
# 100 (outer Nesterov lr 0.7, momentum 0.9, the paper's), streaming DiLoCo H = 50 in 4 fragments.
# The peer: PyTorch DDP (gloo, 4 processes on loopback, one gradient bucket: see below) with the
# same recipe, synchronous and with its PowerSGD hook at rank 4 (start_powerSGD_iter 10); its
# val_loss is over the whole split too.
# Data order and initial weights come from different random streams in the peer, so its losses
# agree with lockstep's only to a run-to-run spread.
# Usage: bench/low_comm.sh [steps=2000] [peer=1]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-2000}
PEER=${2:-1}
source bench/peer_lib.sh
peer_setup
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
machine_line

row() {  # name, then --set flags
  local name=$1
  shift
  build/lockstep train --config configs/gpt-tiny.toml --nproc 4 --steps "$STEPS" --set eval.batches=0 \
    --set eval.every="$STEPS" --set train.log_every=100 --out "$tmp/$name" "$@" >/dev/null 2>&1
  python3 - "$tmp/$name/metrics.jsonl" "$name" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [r for r in rows if "loss" in r and "event" not in r]
val = [r["val_loss"] for r in rows if "val_loss" in r][-1]
sent = sum(r["comm_bytes"] for r in train)
tps = sorted(r["tokens_per_s"] for r in train[3:])[len(train[3:]) // 2]
print(f"{sys.argv[2]} {val:.4f} {sent} {tps:.0f}")
PY
}

echo "gpt-tiny, 4 workers, $STEPS steps, global batch 16 x 128; val_loss over the whole split; bytes: rank 0's sum of comm_bytes"
printf "%-22s %10s %10s %14s %10s %12s\n" run val_loss "vs sync" "bytes sent" "fewer x" "tokens/s"
sync_val="" sync_bytes=""
show() {  # a row's line, printed as soon as it is measured
  local name val bytes tps
  read -r name val bytes tps <<<"$1"
  [ -z "$sync_val" ] && { sync_val=$val; sync_bytes=$bytes; }
  python3 - "$name" "$val" "$bytes" "$tps" "$sync_val" "$sync_bytes" <<'PY'
import sys
name, val, b, tps, sv, sb = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5]), int(sys.argv[6])
fewer = f"{sb / b:.1f}" if b else "inf"
print(f"{name:<22} {val:10.4f} {100 * (val / sv - 1):+9.2f}% {b:14d} {fewer:>10} {tps:>12}", flush=True)
PY
}
show "$(row sync)"
for r in 1 4 16; do
  show "$(row powersgd-r$r --set train.grad_compression=powersgd --set train.powersgd_rank=$r)"
done
for h in 10 50 100; do
  show "$(row diloco-h$h --set train.sync=diloco --set train.diloco_inner_steps=$h)"
done
show "$(row streaming-h50-f4 --set train.sync=diloco --set train.diloco_inner_steps=50 --set train.diloco_fragments=4)"

if [ "$PEER" = 1 ]; then
  # torch 1.13's PowerSGD hook over gloo aborts when two buckets' hooks run at once ("enforce
  # fail at gloo/transport/tcp/pair.cc: op.preamble.length <= op.nbytes"): the peer runs with
  # the whole gradient in one DDP bucket (both of its rows), started as torch_ddp.sh starts ranks.
  peer_one_bucket_wrapper "$tmp"
  peer_ddp() {  # extra args; prints the rank-0 line
    local port=$((29600 + RANDOM % 200)) r
    for r in 0 1 2 3; do
      env $(peer_env 1) MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=4 RANK=$r /usr/bin/python3 \
        "$tmp/one_bucket.py" "$PEERS/torch_gpt.py" --ddp --steps "$STEPS" --corpus /usr/share/games/fortunes "$@" \
        >"$tmp/peer$r.log" 2>&1 &
    done
    wait || true
    grep val_loss "$tmp/peer0.log" || echo "failed"
  }
  peer_sync=$(peer_ddp)
  peer_psgd=$(peer_ddp --powersgd 4)
  printf "%-22s %10s %10s\n" "pytorch ddp" "$(peer_field "$peer_sync" val_loss)" "(peer)"
  printf "%-22s %10s %10s\n" "pytorch powersgd r4" "$(peer_field "$peer_psgd" val_loss)" "(peer)"
  echo "peer: $(grep -o 'torch [^ ]*' <<<"$peer_sync") on $(peer_check_blas "$peer_sync"), DDP over gloo (one bucket), 4 processes of 1 thread"
fi
