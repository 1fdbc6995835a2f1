// GEMM throughput on one compute thread: raw dnnl_sgemm against lockstep's Gemm wrapper
// (default and deterministic mode), for square sizes and the GPT-tiny training shapes,
// plus the batched small GEMMs of causal attention.
//   build/gemm_bench --benchmark_min_time=0.2
// GFLOP/s counters are per CPU-second (benchmark's default), so they stay meaningful on a
// loaded machine; compare rows measured in the same run.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <dnnl.h>

#include <vector>

#include "lockstep/core/rng.h"
#include "lockstep/tensor/bf16_ops.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/pool_blocked.h"
#include "lockstep/tensor/threads.h"

namespace {

using namespace lockstep::tensor;

std::vector<float> Random(int64_t n, uint64_t stream) {
  lockstep::Rng rng(7, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = rng.Uniform() - 0.5f;
  return v;
}

// Args: M, N, K, trans_a, trans_b. GPT-tiny (B*T = 2048 rows, C = 128):
//   forward  qkv 2048x384x128, proj 2048x128x128, fc 2048x512x128, fcproj 2048x128x512,
//            head 2048x256x128;
//   backward dinp = dout.W (N,N): 2048x128x384 ...; dW = dout^T.inp (T,N): 384x128x2048 ...
void Shapes(benchmark::internal::Benchmark* b) {
  b->Args({512, 512, 512, 0, 0})->Args({1024, 1024, 1024, 0, 0});
  b->Args({2048, 384, 128, 0, 1})->Args({2048, 128, 128, 0, 1})->Args({2048, 512, 128, 0, 1});
  b->Args({2048, 128, 512, 0, 1})->Args({2048, 256, 128, 0, 1});
  b->Args({2048, 128, 384, 0, 0})->Args({2048, 128, 512, 0, 0})->Args({2048, 512, 128, 0, 0});
  b->Args({384, 128, 2048, 1, 0})->Args({512, 128, 2048, 1, 0})->Args({128, 512, 2048, 1, 0});
  b->Args({256, 128, 2048, 1, 0});
  b->ArgNames({"M", "N", "K", "ta", "tb"})->Unit(benchmark::kMicrosecond);
}

// GEMM_BENCH_THREADS=N runs the GEMM rows on N compute threads (default 1): the peak that a
// step on N threads is compared with (bench/engine_vs_torch.sh's gpt-small rows).
int GemmThreads() {
  const char* env = std::getenv("GEMM_BENCH_THREADS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 1;
}

template <int kMode>  // 0 = raw dnnl_sgemm, 1 = Gemm, 2 = Gemm deterministic
void BM_Gemm(benchmark::State& state) {
  SetComputeThreads(GemmThreads());
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool ta = state.range(3), tb = state.range(4);
  auto A = Random(M * K, 1), B = Random(K * N, 2);
  std::vector<float> C(M * N, 0.0f);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  ScopedDeterministic det(kMode == 2);
  for (auto _ : state) {
    if (kMode == 0) {
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N);
    } else {
      Gemm(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N);
    }
    benchmark::DoNotOptimize(C.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * N * K * state.iterations(), benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
  SetComputeThreads(1);
}
BENCHMARK(BM_Gemm<0>)->Name("dnnl_sgemm")->Apply(Shapes);
BENCHMARK(BM_Gemm<1>)->Name("Gemm")->Apply(Shapes);
BENCHMARK(BM_Gemm<2>)->Name("Gemm_deterministic")->Apply(Shapes);

// Causal attention of GPT-tiny (B=16, T=128, C=128, H=4). FLOP/s counts the dense
// 4*B*H*T*T*hs forward and 8*B*H*T*T*hs backward GEMM work (the causal kernel does about
// half of it).
void BM_Attention(benchmark::State& state) {
  SetComputeThreads(static_cast<int>(state.range(0)));
  const int64_t B = 16, T = 128, C = 128, H = 4, hs = C / H;
  auto qkv = Random(B * T * 3 * C, 3), dout = Random(B * T * C, 4);
  std::vector<float> out(B * T * C), att(B * H * T * T), dqkv(qkv.size());
  const bool backward = state.range(1);
  for (auto _ : state) {
    AttentionForward(out.data(), att.data(), qkv.data(), B, T, C, H);
    if (backward) {
      AttentionBackward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C, H);
    }
    benchmark::DoNotOptimize(dqkv.data());
  }
  double flops = (backward ? 12.0 : 4.0) * B * H * T * T * hs;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * state.iterations(), benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  SetComputeThreads(1);
}
BENCHMARK(BM_Attention)
    ->ArgNames({"threads", "bwd"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Unit(benchmark::kMillisecond);

// The same attention GEMMs as plain dense BatchedGemm calls (no causal skipping), for
// comparison: QK^T, PV forward; dP, dQ, dK, dV backward.
void BM_AttentionDenseBatchedGemm(benchmark::State& state) {
  SetComputeThreads(1);
  const int64_t B = 16, T = 128, C = 128, H = 4, hs = C / H, BH = B * H;
  auto q = Random(BH * T * hs, 5), k = Random(BH * T * hs, 6);
  std::vector<float> s(BH * T * T), o(BH * T * hs);
  for (auto _ : state) {
    BatchedGemm(false, true, BH, T, T, hs, 1.0f, q.data(), hs, T * hs, k.data(), hs, T * hs, 0.0f, s.data(), T, T * T);
    BatchedGemm(false, false, BH, T, hs, T, 1.0f, s.data(), T, T * T, k.data(), hs, T * hs, 0.0f, o.data(), hs, T * hs);
    benchmark::DoNotOptimize(o.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * BH * T * T * hs * state.iterations(),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_AttentionDenseBatchedGemm)->Unit(benchmark::kMillisecond);

// bf16 products (bf16 operands, fp32 accumulation into C with beta = 1 like a gradient) on
// gpt-small's shapes (B*T = 2048 rows, C = 768): forward qkv and fc, backward dinp, and the
// weight gradient dW = dout^T.inp with dout stored transposed (ta = 1) or copied row-major
// first (ta = 0, same product): whether the transposed operand costs oneDNN its fast kernel.
void BM_GemmBf16(benchmark::State& state) {
  if (!UseNativeBf16()) {
    state.SkipWithError("no native bf16 kernels on this processor");
    return;
  }
  SetComputeThreads(GemmThreads());
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool ta = state.range(3), tb = state.range(4);
  auto a32 = Random(M * K, 1), b32 = Random(K * N, 2);
  std::vector<uint16_t> A(M * K), B(K * N);
  RoundToBf16(a32.data(), M * K, A.data(), M * K, 1, M * K);
  RoundToBf16(b32.data(), K * N, B.data(), K * N, 1, K * N);
  std::vector<float> C(M * N, 0.0f);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  for (auto _ : state) {
    GemmBf16(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 1.0f, C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * N * K * state.iterations(), benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
  SetComputeThreads(1);
}
BENCHMARK(BM_GemmBf16)
    ->ArgNames({"M", "N", "K", "ta", "tb"})
    ->Args({1024, 1024, 1024, 0, 0})
    ->Args({2048, 2304, 768, 0, 1})
    ->Args({2048, 3072, 768, 0, 1})
    ->Args({2048, 768, 3072, 0, 0})
    ->Args({3072, 768, 2048, 1, 0})
    ->Args({3072, 768, 2048, 0, 0})
    ->Args({768, 768, 2048, 1, 0})
    ->Args({768, 768, 2048, 0, 0})
    ->Unit(benchmark::kMillisecond);

}  // namespace

// The elementwise passes around gpt-tiny's MLP (2048 rows x 512): the fused bias + GELU forward
// (keeping gelu' for backward) and its backward's multiply with the bias gradient's column sums.
// GB/s counts the bytes each must move (3 and 3 floats an element).
void BM_BiasGelu(benchmark::State& state) {
  SetComputeThreads(1);
  const int64_t rows = 2048, cols = 512;
  auto z0 = Random(rows * cols, 11), bias = Random(cols, 12);
  std::vector<float> out(rows * cols), z = z0;
  for (auto _ : state) {
    state.PauseTiming();
    z = z0;
    state.ResumeTiming();
    BiasGelu(out.data(), z.data(), bias.data(), rows, cols, /*keep_grad=*/true);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(12.0 * rows * cols * state.iterations(), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_BiasGelu)->Unit(benchmark::kMicrosecond);

void BM_MulGradColumnSum(benchmark::State& state) {
  SetComputeThreads(1);
  const int64_t rows = 2048, cols = 512;
  auto grad = Random(rows * cols, 13), dout = Random(rows * cols, 14);
  std::vector<float> dinp(rows * cols), colsum(cols);
  for (auto _ : state) {
    MulGradColumnSum(dinp.data(), grad.data(), dout.data(), colsum.data(), rows, cols);
    benchmark::DoNotOptimize(dinp.data());
  }
  state.counters["GB/s"] = benchmark::Counter(12.0 * rows * cols * state.iterations(), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_MulGradColumnSum)->Unit(benchmark::kMicrosecond);

// ReLU + 2x2 max pooling from oneDNN's 16-channel blocked layout and its backward into it, at
// cnn-fashion's first convolution (batch 64, 32 channels, 28 x 28). GB/s counts the bytes the
// pair must move: the blocked activation read and its gradient written (4 bytes each), the
// pooled output written, the pool's record written and read, the pooled gradient read (a
// quarter of that each).
void BM_PoolBlocked(benchmark::State& state) {
  SetComputeThreads(1);
  const int64_t N = 64, C = 32, H = 28, W = 28, n = N * C * H * W, o = n / 4;
  auto x = Random(n, 15), dout = Random(o, 16);
  std::vector<float> pooled(o), dx(n);
  std::vector<int32_t> argmax(o);
  for (auto _ : state) {
    internal::ReluMaxPool2x2FromBlocked(pooled.data(), argmax.data(), x.data(), N, C, H, W, 16);
    internal::ReluMaxPool2x2BackwardToBlocked(dx.data(), argmax.data(), dout.data(), N, C, H, W, 16);
    benchmark::DoNotOptimize(dx.data());
  }
  state.counters["GB/s"] = benchmark::Counter((8.0 * n + 4.0 * 4 * o) * state.iterations(), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_PoolBlocked)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
