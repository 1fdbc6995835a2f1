#!/bin/bash
# Checkpoint write speed and async-save stall, in one run on one file system:
#   1. a synchronous save's throughput (tensor bytes / write_ms, from metrics.jsonl) against
#      the disk's sequential write speed, `dd bs=1M conv=fsync` of the same size, same directory;
#   2. the training-step stall of an async save (snapshot copy) against a synchronous save.
# The model is gpt-tiny widened so a checkpoint (weights + AdamW moments) is ~150 MB.
# Usage: bench/checkpoint.sh [dir on the file system to measure] (needs scripts/setup.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-$PWD}
tmp=$(mktemp -d "$BASE/lockstep-ckpt-bench.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT

run() {  # name async
  build/lockstep train --config configs/gpt-tiny.toml --set model.width=512 --set model.layers=4 \
    --set model.heads=8 --set model.context=64 --set train.batch_size=2 --set eval.batches=1 --set train.log_every=1 \
    --steps 30 --set checkpoint.every=5 --set checkpoint.keep=2 --set checkpoint.async="$2" \
    --out "$tmp/$1" >/dev/null 2>&1
}
run sync false
run async true
bytes=$(python3 -c "import json;print([json.loads(l) for l in open('$tmp/sync/metrics.jsonl') if '\"checkpoint\"' in l][0]['bytes'])")
mb=$(( (bytes + 1048575) / 1048576 ))
dd_out=$(dd if=/dev/zero of="$tmp/dd.bin" bs=1M count="$mb" conv=fsync 2>&1 | tail -1)
dd_s=$(echo "$dd_out" | sed -n 's/.*copied, \([0-9.]*\) s.*/\1/p')

python3 - "$tmp" "$mb" "$dd_s" <<'PY'
import json, statistics, sys
tmp, mb, dd_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def saves(name):
    return [json.loads(l) for l in open(f"{tmp}/{name}/metrics.jsonl") if '"checkpoint"' in l]
def steps(name):
    return [json.loads(l)["step_ms"] for l in open(f"{tmp}/{name}/metrics.jsonl") if '"loss"' in l]
# The run's last save is written at once from the live state (nothing is left to overlap it
# with); the async stall figures are those of the saves during training.
sync, asy = saves("sync"), [s for s in saves("async") if s["async"]]
mbps = statistics.median(s["mb_per_s"] for s in sync)
dd_mbps = mb * 1048576 / 1e6 / dd_s
stall_sync = statistics.median(s["stall_ms"] for s in sync)
stall_async = statistics.mean(s["stall_ms"] for s in asy)
stall_max = max(s["stall_ms"] for s in asy)
print(f"checkpoint {sync[0]['bytes']/1e6:.1f} MB (weights + AdamW moments), {len(sync)} saves per run")
print(f"{'':<34}{'lockstep':>12}{'dd conv=fsync':>16}{'ratio':>9}")
print(f"{'write throughput (median)':<34}{mbps:>8.0f} MB/s{dd_mbps:>11.0f} MB/s{100*mbps/dd_mbps:>8.0f}%")
print(f"{'':<34}{'async':>12}{'sync':>16}{'ratio':>9}")
print(f"{'step stall per save (async mean)':<34}{stall_async:>9.1f} ms{stall_sync:>13.1f} ms{100*stall_async/stall_sync:>8.1f}%")
print(f"{'step stall, worst async save':<34}{stall_max:>9.1f} ms")
# What checkpointing costs the run overall: the async writer shares the cores with compute.
total = {k: sum(steps(k)) + sum(s["stall_ms"] for s in saves(k)) for k in ("async", "sync")}
print(f"{'steps + stalls, whole run':<34}{total['async']/1e3:>10.2f} s{total['sync']/1e3:>14.2f} s{100*total['async']/total['sync']:>8.0f}%")
PY
