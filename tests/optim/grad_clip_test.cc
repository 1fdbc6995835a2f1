#include "lockstep/optim/grad_clip.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "lockstep/core/rng.h"
#include "lockstep/optim/adamw.h"
#include "lockstep/optim/sgd.h"

namespace lockstep::optim {
namespace {

TEST(GradClip, NormOfThreeFourIsFive) {
  std::vector<float> g = {3.0f, 4.0f};
  EXPECT_EQ(GlobalGradNorm(g.data(), 2), 5.0);
  EXPECT_EQ(GlobalGradNorm(g.data(), 0), 0.0);
}

// The trainer no longer clips the gradient in a pass of its own: the optimizer multiplies each
// gradient by ClipFactor as it reads it. Same float product, so the same bits as clipping first
// and stepping with factor 1, for AdamW (decayed and undecayed groups) and SGD with momentum,
// Nesterov and weight decay, over sizes with a tail beyond the lane width, for three steps.
TEST(GradClip, OptimizersGivenTheClipFactorStepAsAfterAClippingPass) {
  constexpr int64_t kN = 1003;
  const std::vector<ParamGroupSpan> groups = {{0, 700, true}, {700, kN - 700, false}};
  Rng rng(7, 0);
  std::vector<float> p0(kN), g(kN);
  for (int64_t i = 0; i < kN; ++i) {
    p0[i] = rng.Normal();
    g[i] = 3.0f * rng.Normal();
  }
  const double norm = GlobalGradNorm(g.data(), kN);
  const float factor = ClipFactor(1.0, norm);
  ASSERT_LT(factor, 1.0f);
  EXPECT_EQ(ClipFactor(1e9, norm), 1.0f);
  EXPECT_EQ(ClipFactor(1.0, std::numeric_limits<double>::quiet_NaN()), 1.0f);
  std::vector<float> clipped = g;
  EXPECT_EQ(static_cast<float>(ClipByGlobalNorm(clipped.data(), kN, 1.0, norm)), factor);

  AdamWOptions ao;
  ao.weight_decay = 0.1;
  auto a1 = AdamW::Create(ao, groups, {0, kN}), a2 = AdamW::Create(ao, groups, {0, kN});
  ASSERT_TRUE(a1.ok() && a2.ok());
  SgdOptions so;
  so.momentum = 0.9;
  so.nesterov = true;
  so.weight_decay = 0.01;
  auto s1 = Sgd::Create(so, groups, {0, kN}), s2 = Sgd::Create(so, groups, {0, kN});
  ASSERT_TRUE(s1.ok() && s2.ok());
  std::vector<float> pa1 = p0, pa2 = p0, ps1 = p0, ps2 = p0;
  for (int step = 0; step < 3; ++step) {
    a1->Step(pa1.data(), clipped.data(), 1e-2f);
    a2->Step(pa2.data(), g.data(), 1e-2f, factor);
    s1->Step(ps1.data(), clipped.data(), 1e-2f);
    s2->Step(ps2.data(), g.data(), 1e-2f, factor);
  }
  EXPECT_EQ(std::memcmp(pa1.data(), pa2.data(), kN * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(ps1.data(), ps2.data(), kN * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(pa1.data(), p0.data(), kN * sizeof(float)), 0);
}

TEST(GradClip, ClipsOnlyAboveMaxNorm) {
  std::vector<float> g = {3.0f, 4.0f};
  // max_norm 10 > 5: clip_coef = 10/(5+1e-6) > 1 -> untouched, factor 1.
  EXPECT_EQ(ClipByGlobalNorm(g.data(), 2, 10.0, 5.0), 1.0);
  EXPECT_EQ(g, (std::vector<float>{3.0f, 4.0f}));
  // max_norm 5 == norm: clip_coef = 5/(5+1e-6) < 1, so PyTorch scales (by 0.9999998).
  double c = ClipByGlobalNorm(g.data(), 2, 5.0, 5.0);
  EXPECT_DOUBLE_EQ(c, 5.0 / (5.0 + 1e-6));
  // max_norm 1: factor 1/(5+1e-6) -> [0.6, 0.8] up to the 1e-6 term; new norm ~1.
  g = {3.0f, 4.0f};
  c = ClipByGlobalNorm(g.data(), 2, 1.0, 5.0);
  EXPECT_DOUBLE_EQ(c, 1.0 / (5.0 + 1e-6));
  EXPECT_FLOAT_EQ(g[0], 3.0f * static_cast<float>(c));
  EXPECT_NEAR(g[0], 0.6, 1e-6);
  EXPECT_NEAR(g[1], 0.8, 1e-6);
  EXPECT_NEAR(GlobalGradNorm(g.data(), 2), 1.0, 1e-6);
}

TEST(GradClip, NonFiniteNormLeavesGradientsAlone) {
  std::vector<float> g = {1.0f, std::numeric_limits<float>::infinity()};
  double norm = GlobalGradNorm(g.data(), 2);
  EXPECT_TRUE(std::isinf(norm));
  EXPECT_TRUE(std::isnan(ClipByGlobalNorm(g.data(), 2, 1.0, norm)));
  EXPECT_EQ(g[0], 1.0f);
}

std::vector<float> Random(int64_t n) {
  Rng rng(11, 0);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = rng.Normal() * 1e-2f;
  return x;
}

TEST(GradClip, NormMatchesHighPrecisionSum) {
  const int64_t n = 3 * 4096 + 123;
  std::vector<float> g = Random(n);
  long double ref = 0;
  for (float x : g) ref += static_cast<long double>(x) * x;
  double norm = GlobalGradNorm(g.data(), n);
  EXPECT_NEAR(norm, std::sqrt(static_cast<double>(ref)), 1e-12 * norm);
}

TEST(ExactSquareSum, AnyPartitionGivesTheSameBits) {
  // Values spanning many binades (tiny, subnormal, huge), cut into pieces three different
  // ways and merged in different orders, also through the i64 words an allreduce would sum.
  std::vector<float> g = Random(10007);
  g[5] = 1e-40f;  // subnormal
  g[6] = 3e38f;   // near FLT_MAX: its square overflows float but not the accumulator
  g[7] = -2.5e-30f;
  g[8] = -0.0f;
  const double whole = GlobalGradNorm(g.data(), static_cast<int64_t>(g.size()));
  for (int64_t cut : {1, 4096, 9999}) {
    ExactSquareSum a, b;
    a.Add(g.data(), cut);
    b.Add(g.data() + cut, static_cast<int64_t>(g.size()) - cut);
    ExactSquareSum ba = b;
    ba.Merge(a);
    EXPECT_EQ(NormOf(ba), whole) << cut;
    int64_t wa[ExactSquareSum::kWords], wb[ExactSquareSum::kWords];
    a.ToWords(wa);
    b.ToWords(wb);
    for (int i = 0; i < ExactSquareSum::kWords; ++i) wa[i] += wb[i];
    EXPECT_EQ(NormOf(ExactSquareSum::FromWords(wa)), whole) << cut;
  }
  // The huge element dominates: the norm is 3e38 to double precision.
  EXPECT_NEAR(whole, 3e38, 3e38 * 1e-7);
}

// A gradient-sized Add runs on the compute threads with per-thread partial sums: the words
// must equal those of small serial pieces merged, for any thread count, and the value the
// long-double sum (which is exact to ~1e-19 here).
TEST(ExactSquareSum, ThreadCountDoesNotChangeABit) {
  std::vector<float> g = Random((int64_t{1} << 20) + 7);
  g[1000] = 1e-40f;  // subnormal
  g[300000] = 3e20f;
  g[999999] = -7e-25f;
  ExactSquareSum pieces;
  for (size_t at = 0; at < g.size(); at += 4099) {
    ExactSquareSum piece;
    piece.Add(g.data() + at, std::min<int64_t>(4099, static_cast<int64_t>(g.size() - at)));
    pieces.Merge(piece);
  }
  int64_t want[ExactSquareSum::kWords];
  pieces.ToWords(want);
  for (int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    ExactSquareSum s;
    s.Add(g.data(), static_cast<int64_t>(g.size()));
    int64_t got[ExactSquareSum::kWords];
    s.ToWords(got);
    for (int i = 0; i < ExactSquareSum::kWords; ++i) EXPECT_EQ(got[i], want[i]) << threads << " threads, word " << i;
  }
  omp_set_num_threads(1);
  long double ref = 0;
  for (float x : g) ref += static_cast<long double>(x) * x;
  EXPECT_NEAR(pieces.Value(), static_cast<double>(ref), 1e-15 * static_cast<double>(ref));
}

// The per-exponent tables against the definition, element by element: each square M^2 placed
// at bit 2e - 2 of the 32-bit digits (units of 2^-298), carries propagated at the end. Values of
// every exponent (subnormals, FLT_MAX), zeros, and 2^17 copies of FLT_MAX in a row (the most one
// table entry can take between flushes).
TEST(ExactSquareSum, EqualsTheElementByElementSum) {
  std::vector<float> g;
  for (uint32_t exp = 0; exp < 255; ++exp)
    for (uint32_t mant : {0u, 1u, 0x400000u, 0x7fffffu, 0x123457u}) {
      const uint32_t bits = (exp << 23) | mant | (mant == 1u ? 0x80000000u : 0u);
      float x;
      std::memcpy(&x, &bits, sizeof x);
      g.push_back(x);
    }
  const std::vector<float> random = Random(5000);
  g.insert(g.end(), random.begin(), random.end());
  g.insert(g.end(), int64_t{1} << 17, std::numeric_limits<float>::max());
  std::vector<unsigned __int128> ref(ExactSquareSum::kDigits + 4, 0);
  for (float x : g) {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    const uint32_t exp = (bits >> 23) & 0xffu;
    const uint64_t mant = (bits & 0x7fffffu) | (exp != 0 ? 0x800000u : 0u);
    const uint32_t shift = 2 * std::max(exp, 1u) - 2;
    const unsigned __int128 v = static_cast<unsigned __int128>(mant * mant) << (shift % 32);
    for (uint32_t k = 0; k < 3; ++k) ref[shift / 32 + k] += static_cast<uint32_t>(v >> (32 * k));
  }
  unsigned __int128 carry = 0;
  for (unsigned __int128& d : ref) {
    d += carry;
    carry = d >> 32;
    d &= 0xffffffffu;
  }
  ExactSquareSum s;
  s.Add(g.data(), static_cast<int64_t>(g.size()));
  int64_t words[ExactSquareSum::kWords];
  s.ToWords(words);
  for (int i = 0; i < ExactSquareSum::kDigits; ++i) EXPECT_EQ(words[i], static_cast<int64_t>(ref[i])) << "digit " << i;
  EXPECT_EQ(words[ExactSquareSum::kDigits], 0);  // no infinities
  EXPECT_EQ(words[ExactSquareSum::kDigits + 1], 0);
}

TEST(ExactSquareSum, IsExactWhereDoubleSumsAreNot) {
  // 2^60 + 1 + 1 + ... : a double accumulator started with the big term loses the ones.
  std::vector<float> g(1025, 1.0f);
  g[0] = 1073741824.0f;  // 2^30, square 2^60
  ExactSquareSum s;
  s.Add(g.data(), static_cast<int64_t>(g.size()));
  EXPECT_EQ(s.Value(), 1152921504606846976.0 + 1024.0);  // 2^60 + 1024 is a double
}

TEST(ExactSquareSum, NanWinsOverInfinity) {
  std::vector<float> g = {1.0f, std::numeric_limits<float>::infinity()};
  ExactSquareSum s;
  s.Add(g.data(), 2);
  EXPECT_TRUE(std::isinf(s.Value()));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  s.Add(&nan, 1);
  EXPECT_TRUE(std::isnan(s.Value()));
}

}  // namespace
}  // namespace lockstep::optim
