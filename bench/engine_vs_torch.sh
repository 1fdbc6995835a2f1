#!/bin/bash
# One worker against the PyTorch peer (Debian's torch on OpenBLAS), in one run, with the same
# compute thread count on both sides: tokens/s (gpt-tiny) and images/s (cnn-fashion), peak
# RSS of each process, and lockstep's achieved GFLOP/s of the training step (causal attention
# counted as the kernel computes it) against dnnl_sgemm's peak measured in the same run.
# The peer's BLAS is printed and must be OpenBLAS (the benchmark fails otherwise).
# Then gpt-small (GPT-2-small's shape on bytes, batch 8, configs/gpt-small.toml) with 2 compute
# threads on both sides: fp32, bf16 (lockstep train.precision = bf16 against torch's bf16
# autocast) and activation recompute (train.recompute = block against lockstep's own "none":
# step time and the activation bytes of the memory row).
# llama-tiny (configs/llama-tiny.toml, gpt-tiny's Llama twin) runs beside gpt-tiny against
# shared/peers/torch_llama.py, and the last section is bench/llama_135m.sh (SmolLM2-135M's shape,
# fp32 and bf16, 2 threads).
# Usage: bench/engine_vs_torch.sh [gpt_steps=40] [cnn_steps=200] [threads=1] [small_steps=6] [rounds=3]
#        [small_rounds=2] [llama_135m_steps=6]
# (llama_135m_steps=0 skips the 135M shape, about 4 minutes a round).
# (small_steps=0 skips gpt-small, which takes about 7 minutes a round on a 2-core machine;
# rounds / small_rounds: how many times the gpt-tiny and cnn-fashion pairs / the gpt-small
# fp32 and bf16 pairs run, alternating the two sides).
# Needs scripts/setup.sh (installs the peer's packages itself when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
GPT_STEPS=${1:-40}
CNN_STEPS=${2:-200}
THREADS=${3:-1}
SMALL_STEPS=${4:-6}
ROUNDS=${5:-3}
SMALL_ROUNDS=${6:-2}
LLAMA_135M_STEPS=${7:-6}
SMALL_THREADS=2
source bench/peer_lib.sh
peer_setup
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LS=build/lockstep

machine_line

# The best GFLOP/s of one gemm_bench row (THREADS compute threads, FILTER a benchmark regex); 0
# where the row does not run (no bf16 kernels on this processor).
gemm_peak() {
  GEMM_BENCH_THREADS=$1 build/gemm_bench --benchmark_filter="$2" --benchmark_format=json 2>/dev/null |
    python3 -c "import json,sys; print(max([b.get('GFLOP/s', 0) for b in json.load(sys.stdin)['benchmarks']] + [0]) / 1e9)"
}
# dnnl_sgemm's GFLOP/s on a 1024^3 product with T compute threads: the peak an fp32 step is
# compared with. bf16_peak: the same for lockstep's bf16 product (oneDNN's bf16 GEMM, fp32
# accumulation), the peak a bf16 step is compared with.
sgemm_peak() { gemm_peak "$1" '^dnnl_sgemm/M:1024/N:1024/K:1024'; }
bf16_peak() { gemm_peak "$1" '^BM_GemmBf16/M:1024/N:1024/K:1024'; }

# This machine's speed drifts by tens of percent within minutes (a shared VM), so the two
# sides run alternately, ROUNDS times, and every figure is the median over the rounds; each
# round's ratio is printed too. Per round: lockstep's median tokens|images/s and GFLOP/s after
# warm-up and its process's peak RSS, the peer's figures, and the sgemm peak.
rounds_file="$tmp/rounds"
for round in $(seq 1 "$ROUNDS"); do
  rm -rf "$tmp/gpt" "$tmp/cnn"
  ls_gpt_rss=$(rss_run $LS train --config configs/gpt-tiny.toml --steps "$GPT_STEPS" --set train.threads="$THREADS" \
    --set eval.batches=1 --set checkpoint.keep=1 --out "$tmp/gpt")
  pt_gpt=$(peer_run "$THREADS" "$PEERS/torch_gpt.py" --steps "$GPT_STEPS")
  blas=$(peer_check_blas "$pt_gpt")
  ls_cnn_rss=$(rss_run $LS train --config configs/cnn-fashion.toml --steps "$CNN_STEPS" --set train.threads="$THREADS" \
    --set eval.batches=1 --set checkpoint.keep=1 --out "$tmp/cnn")
  pt_cnn=$(peer_run "$THREADS" "$PEERS/torch_cnn.py" --epochs "$(python3 -c "print($CNN_STEPS*64/60000)")")
  peer_check_blas "$pt_cnn" >/dev/null
  rm -rf "$tmp/llama"
  ls_llama_rss=$(rss_run $LS train --config configs/llama-tiny.toml --steps "$GPT_STEPS" --set train.threads="$THREADS" \
    --set eval.batches=1 --set checkpoint.keep=1 --out "$tmp/llama")
  pt_llama=$(peer_run "$THREADS" "$PEERS/torch_llama.py" --steps "$GPT_STEPS")
  peer_check_blas "$pt_llama" >/dev/null
  echo "$(metrics_median "$tmp/gpt/metrics.jsonl" tokens_per_s) $(peer_field "$pt_gpt" tokens/s)" \
    "$(metrics_median "$tmp/cnn/metrics.jsonl" samples_per_s) $(peer_field "$pt_cnn" images/s)" \
    "$ls_gpt_rss $(peer_field "$pt_gpt" peak_rss_kb) $ls_cnn_rss $(peer_field "$pt_cnn" peak_rss_kb)" \
    "$(metrics_median "$tmp/gpt/metrics.jsonl" gflops) $(metrics_median "$tmp/cnn/metrics.jsonl" gflops)" \
    "$(sgemm_peak "$THREADS")" \
    "$(metrics_median "$tmp/llama/metrics.jsonl" tokens_per_s) $(peer_field "$pt_llama" tokens/s)" \
    "$ls_llama_rss $(peer_field "$pt_llama" peak_rss_kb) $(metrics_median "$tmp/llama/metrics.jsonl" gflops)" \
    >>"$rounds_file"
done

echo "peer: $(head -c 60 <<<"$pt_gpt" | cut -d' ' -f1-2), BLAS $blas; $THREADS compute thread(s) on both sides"
python3 - "$rounds_file" <<'PY'
import statistics, sys
rounds = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
for i, r in enumerate(rounds, 1):
    lt, pt, li, pi, ll, pl = r[0], r[1], r[2], r[3], r[11], r[12]
    print(f"round {i}: gpt-tiny {lt:.0f} vs {pt:.0f} t/s ({lt/pt:.2f}x), cnn-fashion {li:.0f} vs {pi:.0f} i/s ({li/pi:.2f}x), "
          f"llama-tiny {ll:.0f} vs {pl:.0f} t/s ({ll/pl:.2f}x)")
med = lambda k: statistics.median(r[k] for r in rounds)
ratio = lambda a, b: statistics.median(r[a] / r[b] for r in rounds)
lt, pt, li, pi, lgr, pgr, lcr, pcr = (med(k) for k in range(8))
print(f"median of {len(rounds)} rounds:")
print(f"{'workload':<14}{'lockstep':>14}{'pytorch':>14}{'ratio':>8}{'RSS lockstep':>15}{'RSS pytorch':>13}{'ratio':>7}")
print(f"{'gpt-tiny':<14}{lt:>10.0f} t/s{pt:>10.0f} t/s{ratio(0, 1):>7.2f}x{lgr/1024:>11.0f} MiB{pgr/1024:>9.0f} MiB{lgr/pgr:>6.2f}x")
print(f"{'cnn-fashion':<14}{li:>10.0f} i/s{pi:>10.0f} i/s{ratio(2, 3):>7.2f}x{lcr/1024:>11.0f} MiB{pcr/1024:>9.0f} MiB{lcr/pcr:>6.2f}x")
ll, pl, llr, plr = med(11), med(12), med(13), med(14)
print(f"{'llama-tiny':<14}{ll:>10.0f} t/s{pl:>10.0f} t/s{ratio(11, 12):>7.2f}x{llr/1024:>11.0f} MiB{plr/1024:>9.0f} MiB{llr/plr:>6.2f}x")
print(f"achieved GFLOP/s of the training step: gpt-tiny {med(8):.1f}, cnn-fashion {med(9):.1f}, llama-tiny {med(15):.1f}; "
      f"dnnl_sgemm 1024^3 peak {med(10):.1f} -> {100*ratio(8, 10):.0f}% / {100*ratio(9, 10):.0f}% / "
      f"{100*ratio(15, 10):.0f}% of peak (each round's step against that round's peak)")
PY

if [ "$SMALL_STEPS" -gt 0 ]; then

# gpt-small: one lockstep run per mode; prints "tokens/s gflops peak_rss_kb activation_bytes".
small_run() {
  local name=$1
  shift
  local rss
  rss=$(rss_run $LS train --config configs/gpt-small.toml --steps "$SMALL_STEPS" --set train.threads="$SMALL_THREADS" \
    --set eval.batches=1 --set checkpoint.keep=1 --out "$tmp/$name" "$@")
  python3 - "$tmp/$name/metrics.jsonl" "$rss" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [r for r in rows if "loss" in r and "tokens_per_s" in r][2:]  # after warm-up
mem = [r for r in rows if r.get("event") == "memory"][-1]
print(statistics.median(r["tokens_per_s"] for r in train), statistics.median(r["gflops"] for r in train),
      sys.argv[2], mem["peak_activation_bytes"])
PY
}
# Like the pairs above, the sides alternate over SMALL_ROUNDS rounds (medians printed), and
# the sgemm peak is measured right before and right after each fp32 run: the larger of the two
# counts (the machine's speed at that moment, not at some other minute; taking the larger keeps
# the percentage from being flattered by a slow peak measurement).
small_args=(--steps "$SMALL_STEPS" --layers 12 --embd 768 --heads 12 --block 256 --batch 8)
small_file="$tmp/small_rounds"
for ((r = 1; r <= SMALL_ROUNDS; r++)); do
  p_before=$(sgemm_peak "$SMALL_THREADS")
  read -r s_tok s_gf s_rss s_act < <(small_run "fp32-$r")
  p_after=$(sgemm_peak "$SMALL_THREADS")
  pt_small=$(peer_run "$SMALL_THREADS" "$PEERS/torch_gpt.py" "${small_args[@]}")
  peer_check_blas "$pt_small" >/dev/null
  q_before=$(bf16_peak "$SMALL_THREADS")
  read -r b_tok b_gf b_rss _ < <(small_run "bf16-$r" --set train.precision=bf16)
  q_after=$(bf16_peak "$SMALL_THREADS")
  pt_small_bf16=$(peer_run "$SMALL_THREADS" "$PEERS/torch_gpt.py" --bf16 "${small_args[@]}")
  echo "$s_tok $(peer_field "$pt_small" tokens/s) $s_rss $(peer_field "$pt_small" peak_rss_kb)" \
    "$b_tok $(peer_field "$pt_small_bf16" tokens/s) $b_rss $(peer_field "$pt_small_bf16" peak_rss_kb)" \
    "$s_act $s_gf $p_before $p_after $b_gf $q_before $q_after" >>"$small_file"
  python3 - "$r" $(tail -1 "$small_file") <<'PY'
import sys
r = sys.argv[1]
st, pt, _, _, bt, pbt, _, _, _, gf, p0, p1, bgf, q0, q1 = map(float, sys.argv[2:])
bf16 = f", bf16 step {bgf:.1f} against bf16 GEMM peaks {q0:.1f} / {q1:.1f} -> {100*bgf/max(q0, q1):.0f}%" if max(q0, q1) > 0 else ""
print(f"gpt-small round {r}: fp32 {st:.0f} vs {pt:.0f} t/s ({st/pt:.2f}x), bf16 {bt:.0f} vs {pbt:.0f} t/s ({bt/pbt:.2f}x, "
      f"{bt/st:.2f}x lockstep fp32), fp32 step {gf:.1f} GFLOP/s against sgemm peaks {p0:.1f} before / {p1:.1f} after "
      f"-> {100*gf/max(p0, p1):.0f}%{bf16}")
PY
done
read -r r_tok _ r_rss r_act < <(small_run recompute --set train.recompute=block)
bf16_isa=$(grep -qw 'avx512_bf16\|amx_bf16' /proc/cpuinfo && echo "bf16 instructions present" ||
  echo "no AVX512_BF16/AMX: lockstep's bf16 products run emulated")

echo
echo "gpt-small (85.6M parameters, batch 8 x 256), $SMALL_THREADS compute threads on both sides, median of steps 3..$SMALL_STEPS; $bf16_isa"
python3 - "$small_file" "$r_tok" "$r_rss" "$r_act" <<'PY'
import statistics, sys
rounds = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
st, pt, sr, pr, bt, pbt, br, pbr, sa, gf = (statistics.median(r[i] for r in rounds) for i in range(10))
rt, rr, ra = map(float, sys.argv[2:])
pct = statistics.median(100 * r[9] / max(r[10], r[11]) for r in rounds)
peak = statistics.median(max(r[10], r[11]) for r in rounds)
print(f"median of {len(rounds)} rounds:")
print(f"{'workload':<22}{'lockstep':>12}{'pytorch':>12}{'ratio':>8}{'RSS lockstep':>15}{'RSS pytorch':>13}{'ratio':>7}")
def row(name, l, p, lr, pr):
    print(f"{name:<22}{l:>8.0f} t/s{p:>8.0f} t/s{l/p:>7.2f}x{lr/1024:>11.0f} MiB{pr/1024:>9.0f} MiB{lr/pr:>6.2f}x")
row("gpt-small fp32", st, pt, sr, pr)
row("gpt-small bf16", bt, pbt, br, pbr)
print(f"{'gpt-small recompute':<22}{rt:>8.0f} t/s{'':>12}{'':>8}{rr/1024:>11.0f} MiB")
print(f"bf16 tokens/s {bt/st:.2f}x lockstep fp32's; "
      f"recompute=block: step {st/rt:.2f}x the none step, activation bytes {ra/1e6:.0f} MB vs {sa/1e6:.0f} MB "
      f"({ra/sa:.2f}x)")
print(f"achieved GFLOP/s of the gpt-small fp32 step: {gf:.1f}; dnnl_sgemm 1024^3 peak (same threads, the larger of "
      f"the measurements just before and after each run) {peak:.1f} -> {pct:.0f}% of peak (median of the rounds)")
if all(max(r[13], r[14]) > 0 for r in rounds):
    bgf = statistics.median(r[12] for r in rounds)
    bpeak = statistics.median(max(r[13], r[14]) for r in rounds)
    bpct = statistics.median(100 * r[12] / max(r[13], r[14]) for r in rounds)
    print(f"achieved GFLOP/s of the gpt-small bf16 step: {bgf:.1f}; bf16 GEMM 1024^3 peak (oneDNN, fp32 accumulation, "
          f"measured the same way) {bpeak:.1f} -> {bpct:.0f}% of peak; the bf16 peak is {bpeak/peak:.2f}x the sgemm peak")
PY
fi

if [ "$LLAMA_135M_STEPS" -gt 0 ]; then
  echo
  LLAMA_135M_NO_MACHINE_LINE=1 bench/llama_135m.sh "$LLAMA_135M_STEPS" "$SMALL_ROUNDS" "$SMALL_THREADS"
fi
