#!/bin/bash
# Where a worker's resident memory goes ("memory at the formula"): for one worker of
# each reference workload, the process's peak resident set (getrusage, as the kernel counts it)
# against what the memory row explains:
#   baseline  the process's resident set when the worker starts (binary, libraries, the job's
#             data loaded), rss_baseline_bytes
#   tracked   the tracker's peak of everything lockstep allocates (parameters, gradients,
#             optimizer state, bf16 weight copy, activations, kernel workspace), peak_bytes
#   formula   model states + bf16 copy + the activation formula of docs/memory.md (GPT; the
#             CNN has none, its measured saved activations stand in) + the backward's
#             transient buffers + workspace: the memory row's terms
# and the ratios RSS / (baseline + tracked) and RSS / (baseline + formula). The goal is <= 1.2.
# There is no peer figure here: PyTorch's RSS beside lockstep's is in bench/engine_vs_torch.sh.
# Usage: bench/memory_explained.sh [small_steps=3] (0 skips gpt-small, about 3 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
SMALL_STEPS=${1:-3}
source bench/peer_lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LS=build/lockstep
machine_line

run() {  # name threads config steps [flags...]
  local name=$1 threads=$2 config=$3 steps=$4
  shift 4
  if ! $LS train --config "configs/$config.toml" --steps "$steps" --set train.threads="$threads" --set eval.batches=1 \
    --set checkpoint.keep=1 --out "$tmp/$name" "$@" >/dev/null 2>"$tmp/$name.err"; then
    cat "$tmp/$name.err" >&2
    exit 1
  fi
  echo "$name $threads $tmp/$name/metrics.jsonl" >>"$tmp/runs"
}

run gpt-tiny 1 gpt-tiny 20
run cnn-fashion 1 cnn-fashion 50
if [ "$SMALL_STEPS" -gt 0 ]; then
  run gpt-small 2 gpt-small "$SMALL_STEPS"
  run gpt-small-bf16 2 gpt-small "$SMALL_STEPS" --set train.precision=bf16
  run gpt-small-recompute 2 gpt-small "$SMALL_STEPS" --set train.recompute=block
fi

python3 - "$tmp/runs" <<'PY'
import json, sys
M = 1 << 20
print("MiB; states = parameters + gradients + optimizer + bf16 copy; saved = activations alive when the first")
print("backward starts (measured), formula = docs/memory.md's estimate of them; backward = the activation peak")
print("above saved (gradient buffers of the op being differentiated); workspace = kernel buffers kept between calls")
print(f"{'workload':<20}{'thr':>4}{'RSS':>8}{'base':>7}{'states':>8}{'saved':>8}{'formula':>8}{'backward':>9}"
      f"{'wkspace':>8}{'RSS/(base+tracked)':>20}{'RSS/(base+formula)':>20}")
for line in open(sys.argv[1]):
    name, threads, path = line.split()
    rows = [json.loads(l) for l in open(path) if l.strip()]
    mem = [r for r in rows if r.get("event") == "memory" and r.get("rank") == 0][-1]
    rss, base, tracked, ws = mem["rss_peak_bytes"], mem["rss_baseline_bytes"], mem["peak_bytes"], mem["workspace_bytes"]
    states = mem["params_bytes"] + mem["grads_bytes"] + mem["optimizer_bytes"] + mem["bf16_weights_bytes"]
    saved = mem["saved_activation_bytes"]
    backward = mem["peak_activation_bytes"] - saved
    est = mem.get("activations_estimate")
    # Without a formula (the CNN) the measured saved activations stand in for it.
    formula = est["total"] if est else saved
    explained = base + states + formula + backward + ws
    print(f"{name:<20}{threads:>4}{rss / M:>8.1f}{base / M:>7.1f}{states / M:>8.1f}{saved / M:>8.1f}"
          f"{(f'{formula / M:.1f}' if est else '-'):>8}{backward / M:>9.1f}{ws / M:>8.1f}"
          f"{rss / (base + tracked):>19.2f}x{rss / explained:>19.2f}x")
print("RSS/(base+tracked): against the tracker's peak of everything allocated; RSS/(base+formula): against")
print("base + states + formula + backward + workspace (the memory row's terms, activations by the formula)")
PY
