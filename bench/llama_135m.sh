#!/bin/bash
# SmolLM2-135M's shape (configs/smollm2-135m.toml: 30 layers x 576, 9 query heads over 3 key/value
# heads, SwiGLU 1536, vocabulary 49152, tied) at context 512, batch 4 (2048 tokens a step), with
# 2 compute threads on both sides, against the PyTorch peer shared/peers/torch_llama.py in the same
# shape and recipe (Debian's torch on OpenBLAS): fp32, and bf16 (lockstep train.precision = bf16
# against torch's bf16 autocast). Prints tokens/s, each process's peak RSS, lockstep's achieved
# GFLOP/s of the step against dnnl_sgemm's (and the bf16 GEMM's) 1024^3 peak measured right
# before and right after each run, and bf16 against lockstep's own fp32.
# engine_vs_torch.sh runs it as its last section; it runs alone too.
# Both sides read bytes (lockstep the fortunes corpus, the peer random ids below 49152): the
# arithmetic of a step does not depend on which token ids it reads.
# Usage: bench/llama_135m.sh [steps=6] [rounds=2] [threads=2]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-6}
ROUNDS=${2:-2}
THREADS=${3:-2}
source bench/peer_lib.sh
peer_setup
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LS=build/lockstep
[ "${LLAMA_135M_NO_MACHINE_LINE:-0}" = 1 ] || machine_line

gemm_peak() {
  GEMM_BENCH_THREADS=$1 build/gemm_bench --benchmark_filter="$2" --benchmark_format=json 2>/dev/null |
    python3 -c "import json,sys; print(max([b.get('GFLOP/s', 0) for b in json.load(sys.stdin)['benchmarks']] + [0]) / 1e9)"
}
sgemm_peak() { gemm_peak "$THREADS" '^dnnl_sgemm/M:1024/N:1024/K:1024'; }
bf16_peak() { gemm_peak "$THREADS" '^BM_GemmBf16/M:1024/N:1024/K:1024'; }

CONTEXT=512
BATCH=4
# One lockstep run; prints "tokens/s gflops peak_rss_kb" (medians after the first 3 steps).
ls_run() {
  local name=$1
  shift
  local rss
  rss=$(rss_run $LS train --config configs/smollm2-135m.toml --steps "$STEPS" --set train.threads="$THREADS" \
    --set model.context=$CONTEXT --set train.batch_size=$BATCH --set data.kind=text \
    --set data.dir=/usr/share/games/fortunes --set optim.lr=1e-3 --set optim.beta2=0.999 \
    --set optim.warmup_steps=20 --set optim.min_lr=1e-4 --set train.log_every=1 --set eval.every=0 \
    --set eval.batches=1 --set checkpoint.every=0 --set checkpoint.keep=1 --out "$tmp/$name" "$@")
  echo "$(metrics_median "$tmp/$name/metrics.jsonl" tokens_per_s) $(metrics_median "$tmp/$name/metrics.jsonl" gflops) $rss"
}
# The peer in the same shape; the recipe is torch_llama.py's (AdamW 0.9/0.999, lr 1e-3, warmup
# 20, decay 0.01 on matrices, clipping 1.0), which ls_run sets on lockstep's side too.
peer_args=(--steps "$STEPS" --layers 30 --dim 576 --heads 9 --kv-heads 3 --ffn 1536 --vocab 49152 --tied
  --rope-theta 100000 --block $CONTEXT --batch $BATCH)

rounds_file="$tmp/rounds"
for ((r = 1; r <= ROUNDS; r++)); do
  p0=$(sgemm_peak)
  read -r f_tok f_gf f_rss < <(ls_run "fp32-$r")
  p1=$(sgemm_peak)
  pt=$(peer_run "$THREADS" "$PEERS/torch_llama.py" "${peer_args[@]}")
  blas=$(peer_check_blas "$pt")
  q0=$(bf16_peak)
  read -r b_tok b_gf b_rss < <(ls_run "bf16-$r" --set train.precision=bf16)
  q1=$(bf16_peak)
  ptb=$(peer_run "$THREADS" "$PEERS/torch_llama.py" --bf16 "${peer_args[@]}")
  echo "$f_tok $(peer_field "$pt" tokens/s) $f_rss $(peer_field "$pt" peak_rss_kb)" \
    "$b_tok $(peer_field "$ptb" tokens/s) $b_rss $(peer_field "$ptb" peak_rss_kb)" \
    "$f_gf $p0 $p1 $b_gf $q0 $q1" >>"$rounds_file"
  python3 - "$r" $(tail -1 "$rounds_file") <<'PY'
import sys
r = sys.argv[1]
ft, pt, _, _, bt, pbt, _, _, gf, p0, p1, bgf, q0, q1 = map(float, sys.argv[2:])
bf = f", bf16 step {bgf:.1f} against bf16 GEMM peaks {q0:.1f} / {q1:.1f} -> {100*bgf/max(q0, q1):.0f}%" if max(q0, q1) > 0 else ""
print(f"llama-135m round {r}: fp32 {ft:.0f} vs {pt:.0f} t/s ({ft/pt:.2f}x), bf16 {bt:.0f} vs {pbt:.0f} t/s "
      f"({bt/pbt:.2f}x, {bt/ft:.2f}x lockstep fp32), fp32 step {gf:.1f} GFLOP/s against sgemm peaks {p0:.1f} / {p1:.1f} "
      f"-> {100*gf/max(p0, p1):.0f}%{bf}")
PY
done

echo
echo "llama-135m (SmolLM2-135M's shape, 134.5M parameters, batch $BATCH x $CONTEXT), $THREADS compute threads on both" \
  "sides, median of steps 4..$STEPS; peer: $(head -1 <<<"$pt" | cut -d' ' -f1-2), BLAS $blas"
python3 - "$rounds_file" <<'PY'
import statistics, sys
rounds = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
med = lambda i: statistics.median(r[i] for r in rounds)
ft, pt, fr, pr, bt, pbt, br, pbr = (med(i) for i in range(8))
print(f"median of {len(rounds)} rounds:")
print(f"{'workload':<22}{'lockstep':>12}{'pytorch':>12}{'ratio':>8}{'RSS lockstep':>15}{'RSS pytorch':>13}{'ratio':>7}")
def row(name, l, p, lr, prr):
    print(f"{name:<22}{l:>8.0f} t/s{p:>8.0f} t/s{l/p:>7.2f}x{lr/1024:>11.0f} MiB{prr/1024:>9.0f} MiB{lr/prr:>6.2f}x")
row("llama-135m fp32", ft, pt, fr, pr)
row("llama-135m bf16", bt, pbt, br, pbr)
pct = statistics.median(100 * r[8] / max(r[9], r[10]) for r in rounds)
print(f"bf16 tokens/s {bt/ft:.2f}x lockstep fp32's")
print(f"achieved GFLOP/s of the llama-135m fp32 step: {med(8):.1f}; dnnl_sgemm 1024^3 peak (same threads, the larger "
      f"of the measurements just before and after each run) {statistics.median(max(r[9], r[10]) for r in rounds):.1f} "
      f"-> {pct:.0f}% of peak (median of the rounds)")
if all(max(r[12], r[13]) > 0 for r in rounds):
    bpct = statistics.median(100 * r[11] / max(r[12], r[13]) for r in rounds)
    print(f"achieved GFLOP/s of the llama-135m bf16 step: {med(11):.1f}; bf16 GEMM 1024^3 peak "
          f"{statistics.median(max(r[12], r[13]) for r in rounds):.1f} -> {bpct:.0f}% of peak")
PY
