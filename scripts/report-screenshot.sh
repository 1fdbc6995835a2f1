#!/bin/bash
# Regenerates docs/report.png, the README's picture of `lockstep report`: trains gpt-tiny for a
# few hundred steps on 4 workers with a straggler injected (rank 2 computing 2x slower from
# step 150), renders the run's report and screenshots it with headless Chromium.
# Usage: scripts/report-screenshot.sh [STEPS]   (needs build/lockstep and chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-300}
run=$(mktemp -d /tmp/lockstep-report-shot-XXXXXX)
trap 'rm -rf "$run"' EXIT

build/lockstep train --config configs/gpt-tiny.toml --nproc 4 --steps "$STEPS" --out "$run/gpt-tiny" \
  --set eval.every=50 --set checkpoint.every=100 --set train.log_every=50 \
  --inject-fault "slow:rank=2:factor=2:step=150" >"$run/train.log" 2>&1 || { cat "$run/train.log"; exit 1; }
build/lockstep report "$run/gpt-tiny" --out "$run/report.html"
chromium --headless --disable-gpu --no-sandbox --hide-scrollbars --user-data-dir="$run/profile" \
  --window-size=1280,1960 --screenshot="$run/report.png" "file://$run/report.html" >/dev/null 2>&1
cp "$run/report.png" docs/report.png
echo "docs/report.png written from a $STEPS-step run ($(grep -c '"loss"' "$run/gpt-tiny/metrics.jsonl") training rows)"
