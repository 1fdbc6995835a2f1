#!/bin/bash
# A refactor's check: the reference runs (gpt-tiny, cnn-fashion, gpt-small; default and
# deterministic mode, data/tensor/pipeline parallel, ZeRO, bf16) end with the same
# weights_xxh64 under two lockstep binaries, e.g. the build of an earlier commit and this one.
# Prints one line per run with both hashes; exit 1 when any differs.
# Usage: bench/compare_hashes.sh OLD_BINARY [NEW_BINARY=build/lockstep]
set -uo pipefail
cd "$(dirname "$0")/.."
OLD=$1
NEW=${2:-build/lockstep}
hash_of() {  # binary, then train flags
  local bin=$1 d
  shift
  d=$(mktemp -d)
  "$bin" train "$@" --out "$d" >"$d/out" 2>&1
  python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1]).get('weights_xxh64','FAILED'))" \
    "$d/metrics.jsonl" 2>/dev/null || echo FAILED
  rm -rf "$d"
}
differ=0
while IFS='|' read -r name flags; do
  # shellcheck disable=SC2086
  a=$(hash_of "$OLD" $flags)
  # shellcheck disable=SC2086
  b=$(hash_of "$NEW" $flags)
  [ "$a" = "$b" ] && [ "$a" != FAILED ] && verdict=same || { verdict=DIFFERENT; differ=1; }
  printf '%-32s %s %s %s\n' "$name" "$a" "$b" "$verdict"
done <<'RUNS'
gpt-tiny 30|--config configs/gpt-tiny.toml --steps 30 --set eval.batches=2
gpt-tiny 30 det nproc 2|--config configs/gpt-tiny.toml --steps 30 --set eval.batches=2 --deterministic --nproc 2
gpt-tiny 20 det tp2 pp2 zero1|--config configs/gpt-tiny.toml --steps 20 --set eval.batches=1 --deterministic --nproc 4 --layout tp=2,pp=2 --zero 1
gpt-tiny 20 bf16 nproc 2|--config configs/gpt-tiny.toml --steps 20 --set eval.batches=1 --set train.precision=bf16 --nproc 2
gpt-tiny 20 zero3 nproc 2|--config configs/gpt-tiny.toml --steps 20 --set eval.batches=1 --zero 3 --nproc 2
cnn-fashion 30|--config configs/cnn-fashion.toml --steps 30 --set eval.batches=2
cnn-fashion 30 det nproc 2|--config configs/cnn-fashion.toml --steps 30 --set eval.batches=2 --deterministic --nproc 2
gpt-small 2 det|--config configs/gpt-small.toml --steps 2 --set eval.batches=1 --deterministic
RUNS
exit $differ
