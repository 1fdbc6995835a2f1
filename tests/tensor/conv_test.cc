// Conv2d (oneDNN plans) against a naive double-precision direct convolution.
#include "lockstep/tensor/conv.h"

#include <gtest/gtest.h>

#include <limits>

#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/memory.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/threads.h"
#include "tensor/tensor_test_util.h"

namespace lockstep::tensor {
namespace {

using testing::ExpectNear;
using testing::RandomVector;

struct ConvRef {
  std::vector<double> out, dinp, dw, db;
};

// One loop nest gives the forward and, by visiting the same (input, weight, output)
// triples, its exact adjoint: dinp and dw for L = sum(g * out).
ConvRef RefConv(const Conv2dShape& s, const std::vector<double>& x, const std::vector<double>& w,
                const std::vector<double>& b, const std::vector<double>* g) {
  const int64_t OH = s.OH(), OW = s.OW();
  ConvRef r{std::vector<double>(s.N * s.OC * OH * OW), std::vector<double>(x.size()), std::vector<double>(w.size()),
            std::vector<double>(s.OC)};
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t oc = 0; oc < s.OC; ++oc)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          const int64_t o = ((n * s.OC + oc) * OH + oy) * OW + ox;
          double acc = b.empty() ? 0.0 : b[oc];
          const double go = g ? (*g)[o] : 0.0;
          r.db[oc] += go;
          for (int64_t ic = 0; ic < s.IC; ++ic)
            for (int64_t ky = 0; ky < s.KH; ++ky)
              for (int64_t kx = 0; kx < s.KW; ++kx) {
                int64_t y = oy * s.stride - s.pad + ky, xx = ox * s.stride - s.pad + kx;
                if (y < 0 || y >= s.H || xx < 0 || xx >= s.W) continue;
                const int64_t xi = ((n * s.IC + ic) * s.H + y) * s.W + xx;
                const int64_t wi = ((oc * s.IC + ic) * s.KH + ky) * s.KW + kx;
                acc += x[xi] * w[wi];
                r.dinp[xi] += w[wi] * go;
                r.dw[wi] += x[xi] * go;
              }
          r.out[o] = acc;
        }
  return r;
}

TEST(Conv2dReference, AdjointMatchesFiniteDifferences) {
  Conv2dShape s{1, 2, 4, 5, 2, 3, 3, 2, 1};
  auto x = testing::ToDouble(RandomVector(s.N * s.IC * s.H * s.W, 1));
  auto w = testing::ToDouble(RandomVector(s.OC * s.IC * 9, 2));
  auto g = testing::ToDouble(RandomVector(s.N * s.OC * s.OH() * s.OW(), 3));
  std::vector<double> b = {0.1, -0.2};
  ConvRef r = RefConv(s, x, w, b, &g);
  auto fx = [&](const std::vector<double>& xx) { return testing::Dot(RefConv(s, xx, w, b, nullptr).out, g); };
  auto fw = [&](const std::vector<double>& ww) { return testing::Dot(RefConv(s, x, ww, b, nullptr).out, g); };
  testing::ExpectNear(testing::FiniteDiff(x, fx), r.dinp, 1e-8, 1e-6, "dinp vs FD");
  testing::ExpectNear(testing::FiniteDiff(w, fw), r.dw, 1e-8, 1e-6, "dw vs FD");
}

void CheckConv(const Conv2dShape& s, bool deterministic, int threads) {
  ScopedDeterministic det(deterministic);
  ScopedComputeThreads th(threads);
  const int64_t in_n = s.N * s.IC * s.H * s.W, w_n = s.OC * s.IC * s.KH * s.KW, out_n = s.N * s.OC * s.OH() * s.OW();
  auto x = RandomVector(in_n, 10), w = RandomVector(w_n, 11), b = RandomVector(s.OC, 12);
  auto g = RandomVector(out_n, 13);
  auto gd = testing::ToDouble(g);
  ConvRef r = RefConv(s, testing::ToDouble(x), testing::ToDouble(w), testing::ToDouble(b), &gd);
  Conv2d conv(s);
  std::vector<float> out(out_n, 7.0f), dinp(in_n, 7.0f), dw(w_n, 0.5f), db(s.OC, 0.5f);
  conv.Forward(out.data(), x.data(), w.data(), b.data());
  conv.BackwardData(dinp.data(), g.data(), w.data());              // overwrite
  conv.BackwardWeights(dw.data(), db.data(), g.data(), x.data());  // accumulate onto 0.5
  for (auto& v : r.dw) v += 0.5;
  for (auto& v : r.db) v += 0.5;
  // Each output / input gradient sums IC*KH*KW (or OC*KH*KW) O(1) products: ~1e-6
  // relative. Weight gradients sum N*OH*OW products (up to ~2000): allow 1e-4 absolute.
  std::string what = std::string(deterministic ? "det" : "default") + " threads " + std::to_string(threads);
  ExpectNear(out, r.out, 2e-5, 1e-5, what + " out");
  ExpectNear(dinp, r.dinp, 2e-5, 1e-5, what + " dinp");
  ExpectNear(dw, r.dw, 1e-4, 1e-5, what + " dw");
  ExpectNear(db, r.db, 1e-4, 1e-5, what + " db");
  // Forward without bias.
  conv.Forward(out.data(), x.data(), w.data(), nullptr);
  for (int64_t i = 0; i < out_n; ++i) r.out[i] -= b[(i / (s.OH() * s.OW())) % s.OC];
  ExpectNear(out, r.out, 2e-5, 1e-5, what + " out (no bias)");
}

TEST(Conv2d, CnnFirstLayerShape) { CheckConv({8, 1, 28, 28, 32, 3, 3, 1, 1}, false, 1); }
TEST(Conv2d, CnnSecondLayerShape) { CheckConv({4, 32, 14, 14, 64, 3, 3, 1, 1}, false, 2); }
TEST(Conv2d, StridedNoPadOddSizes) { CheckConv({3, 3, 9, 7, 5, 3, 2, 2, 0}, false, 1); }
TEST(Conv2d, DeterministicModeMatchesReference) {
  CheckConv({6, 4, 10, 10, 8, 3, 3, 1, 1}, true, 2);
  CheckConv({5, 3, 9, 7, 5, 3, 2, 2, 0}, true, 1);  // N=5: chunk 5
}

TEST(Conv2d, DeterministicModeSameBitsForAnyThreadCount) {
  Conv2dShape s{32, 16, 12, 12, 32, 3, 3, 1, 1};
  const int64_t in_n = s.N * s.IC * s.H * s.W, w_n = s.OC * s.IC * 9, out_n = s.N * s.OC * 144;
  auto x = RandomVector(in_n, 20), w = RandomVector(w_n, 21), b = RandomVector(s.OC, 22);
  auto g = RandomVector(out_n, 23);
  std::vector<float> ref;
  ScopedDeterministic det(true);
  for (int threads : {1, 2, 3}) {
    ScopedComputeThreads th(threads);
    Conv2d conv(s);  // plan created under this thread count
    std::vector<float> out(out_n), dinp(in_n), dw(w_n, 0.0f), db(s.OC, 0.0f);
    conv.Forward(out.data(), x.data(), w.data(), b.data());
    conv.BackwardData(dinp.data(), g.data(), w.data());
    conv.BackwardWeights(dw.data(), db.data(), g.data(), x.data());
    std::vector<float> all = out;
    for (auto* v : {&dinp, &dw, &db}) all.insert(all.end(), v->begin(), v->end());
    if (threads == 1)
      ref = all;
    else
      EXPECT_TRUE(testing::BitEqual(all, ref)) << threads;
  }
}

// conv + relu + 2x2 max pool fused (pooling straight from and into the blocked layout where
// the plan has one) gives the bits of the three steps apart: pooled values, and the
// input, weight and bias gradients; in deterministic mode (plain plans) too. Shapes: the
// CNN's two layers, and one whose OC is not a multiple of any block (plain fallback).
void CheckReluPoolFused(const Conv2dShape& s, bool deterministic, uint64_t seed, bool bf16 = false) {
  ScopedDeterministic det(deterministic);
  ScopedPrecision precision(bf16 ? Precision::kBF16 : Precision::kF32);
  const int64_t in_n = s.N * s.IC * s.H * s.W, w_n = s.OC * s.IC * s.KH * s.KW;
  const int64_t out_n = s.N * s.OC * s.OH() * s.OW(), pooled_n = out_n / 4;
  auto x = RandomVector(in_n, seed), w = RandomVector(w_n, seed + 1), b = RandomVector(s.OC, seed + 2);
  auto g = RandomVector(pooled_n, seed + 3);
  x[5] = std::numeric_limits<float>::quiet_NaN();  // NaN propagates the same way through both
  for (size_t i = 3; i < g.size(); i += 97) g[i] = (i % 2 ? 1 : -1) * 1e-39f;  // denormal gradients
  Conv2d apart(s), fused(s);
  // Apart: conv, relu+pool, pool backward into a zeroed buffer, conv backward.
  std::vector<float> y(out_n), p_want(pooled_n), dy(out_n, 0.0f), dx_want(in_n), dw_want(w_n, 0.5f),
      db_want(s.OC, 0.5f);
  std::vector<int32_t> a_want(pooled_n);
  apart.Forward(y.data(), x.data(), w.data(), b.data());
  ReluMaxPool2x2Forward(p_want.data(), a_want.data(), y.data(), s.N, s.OC, s.OH(), s.OW());
  ReluMaxPool2x2Backward(dy.data(), a_want.data(), p_want.data(), g.data(), s.N, s.OC, s.OH(), s.OW());
  // The fused path's weight and bias gradients are its chunks' added in order: a plan of the
  // chunk's rows, chunk by chunk (the same bits where the whole minibatch is one chunk).
  const int64_t rows = fused.FusedChunkRows();
  Conv2dShape cs = s;
  cs.N = rows;
  Conv2d chunk(cs);
  for (int64_t r = 0; r < s.N; r += rows)
    chunk.BackwardWeights(dw_want.data(), db_want.data(), dy.data() + r * out_n / s.N, x.data() + r * in_n / s.N);
  apart.BackwardData(dx_want.data(), dy.data(), w.data());
  // Fused, twice (the plan's buffers are reused).
  for (int round = 0; round < 2; ++round) {
    std::vector<float> p(pooled_n), dx(in_n, 7.0f), dw(w_n, 0.5f), db(s.OC, 0.5f);
    std::vector<int32_t> a(pooled_n);
    fused.ForwardReluPool(p.data(), a.data(), x.data(), w.data(), b.data());
    EXPECT_TRUE(testing::BitEqual(p, p_want)) << round;
    if (deterministic) {
      EXPECT_EQ(a, a_want) << round;  // plain plans: the plain pool's argmax (else the blocked code)
    }
    fused.BackwardReluPool(dx.data(), dw.data(), db.data(), g.data(), a.data(), p.data(), x.data(), w.data());
    EXPECT_TRUE(testing::BitEqual(dx, dx_want)) << round;
    EXPECT_TRUE(testing::BitEqual(dw, dw_want)) << round;
    EXPECT_TRUE(testing::BitEqual(db, db_want)) << round;
    std::vector<float> dw_only(w_n, 0.5f), db_only(s.OC, 0.5f);  // no input gradient wanted
    fused.BackwardReluPool(nullptr, dw_only.data(), db_only.data(), g.data(), a.data(), p.data(), x.data(), w.data());
    EXPECT_TRUE(testing::BitEqual(dw_only, dw_want)) << round;
  }
}

TEST(Conv2d, ReluPoolFusedFirstLayer) { CheckReluPoolFused({8, 1, 28, 28, 32, 3, 3, 1, 1}, false, 30); }
TEST(Conv2d, ReluPoolFusedSecondLayer) { CheckReluPoolFused({4, 32, 14, 14, 64, 3, 3, 1, 1}, false, 40); }
TEST(Conv2d, ReluPoolFusedOddChannels) { CheckReluPoolFused({2, 3, 8, 8, 5, 3, 3, 1, 1}, false, 50); }
// One compute thread: the fused path goes through the minibatch in chunks that fit in L2
// (conv.cc, PoolChunkRows), the CNN's two layers at its batch of 64 rows.
TEST(Conv2d, ReluPoolFusedInChunksOnOneThread) {
  // (The first layer is fused, so chunked, where its weight gradient runs blocked: AVX-512.)
  ScopedComputeThreads one(1);
  const Conv2dShape first{64, 1, 28, 28, 32, 3, 3, 1, 1}, second{64, 32, 14, 14, 64, 3, 3, 1, 1};
  {
    // The chunk's plan runs on the whole minibatch's plan's buffers: no more workspace.
    MemoryTracker tracker;
    ScopedTracker scope(&tracker);
    Conv2d conv(second);
    const int64_t made = tracker.Current(MemoryTag::kWorkspace);
    EXPECT_GT(made, 0);
    EXPECT_LT(conv.FusedChunkRows(), second.N);
    EXPECT_EQ(tracker.Current(MemoryTag::kWorkspace), made);
  }
  CheckReluPoolFused(first, false, 80);
  CheckReluPoolFused(second, false, 90);
}
// bf16 (native where the processor has bf16 instructions): the pool's backward writes the bf16
// output gradient the backward primitives read, rounded as the reorder it replaces rounds
// (denormal gradients included); in chunks on one thread, whole on two.
TEST(Conv2d, ReluPoolFusedInBf16) {
  const Conv2dShape first{64, 1, 28, 28, 32, 3, 3, 1, 1}, second{64, 32, 14, 14, 64, 3, 3, 1, 1};
  if (UseNativeBf16()) {  // the bf16 plans chunk the fused path too
    ScopedPrecision bf16(Precision::kBF16);
    ScopedComputeThreads one(1);
    EXPECT_LT(Conv2d(second).FusedChunkRows(), second.N);
  }
  for (int threads : {1, 2}) {
    ScopedComputeThreads th(threads);
    CheckReluPoolFused(first, false, 100 + threads, /*bf16=*/true);
    CheckReluPoolFused(second, false, 110 + threads, /*bf16=*/true);
  }
}
TEST(Conv2d, ReluPoolFusedDeterministic) { CheckReluPoolFused({16, 32, 14, 14, 64, 3, 3, 1, 1}, true, 60); }
// Input and output of one layout: a plan shares buffers within a role (source-shaped,
// output-shaped), never between the input and the output of one primitive.
TEST(Conv2d, SameShapedInputAndOutput) { CheckConv({4, 16, 14, 14, 16, 3, 3, 1, 1}, false, 1); }
TEST(Conv2d, ReluPoolFusedSameShapedInputAndOutput) { CheckReluPoolFused({4, 16, 14, 14, 16, 3, 3, 1, 1}, false, 70); }

// A blocked plan's buffers are counted in the tracker current when it was made (the memory
// row's workspace_bytes), do not grow with calls, hold one buffer per role and layout (not
// one per primitive), and are freed into that tracker with the plan.
TEST(Conv2d, PlanBuffersAreCountedWorkspace) {
  const Conv2dShape s{16, 32, 14, 14, 64, 3, 3, 1, 1};  // the CNN's second layer
  const int64_t in_n = s.N * s.IC * s.H * s.W, w_n = s.OC * s.IC * s.KH * s.KW, out_n = s.N * s.OC * s.OH() * s.OW();
  MemoryTracker tracker;
  {
    ScopedTracker scope(&tracker);
    Conv2d conv(s);
    const int64_t made = tracker.Current(MemoryTag::kWorkspace);
    auto x = RandomVector(in_n, 1), w = RandomVector(w_n, 2), b = RandomVector(s.OC, 3), g = RandomVector(out_n, 4);
    std::vector<float> out(out_n), dinp(in_n), dw(w_n, 0.0f), db(s.OC, 0.0f);
    for (int i = 0; i < 2; ++i) {
      conv.Forward(out.data(), x.data(), w.data(), b.data());
      conv.Backward(dinp.data(), dw.data(), db.data(), g.data(), x.data(), w.data());
    }
    EXPECT_EQ(tracker.Current(MemoryTag::kWorkspace), made);
    EXPECT_EQ(tracker.Peak(MemoryTag::kWorkspace), made);
    // At most one source-, one output- and three weight-shaped buffers (0 on a plain plan).
    EXPECT_LE(made, static_cast<int64_t>(sizeof(float)) * (in_n + out_n + 3 * w_n));
  }
  EXPECT_EQ(tracker.Current(MemoryTag::kWorkspace), 0);
}

}  // namespace
}  // namespace lockstep::tensor
