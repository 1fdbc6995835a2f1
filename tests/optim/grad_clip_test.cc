#include "lockstep/optim/grad_clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lockstep/core/rng.h"

namespace lockstep::optim {
namespace {

TEST(GradClip, NormOfThreeFourIsFive) {
  std::vector<float> g = {3.0f, 4.0f};
  EXPECT_EQ(GlobalGradNorm(g.data(), 2), 5.0);
  EXPECT_EQ(GlobalGradNorm(g.data(), 0), 0.0);
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
  const int64_t n = 3 * kNormBlock + 123;
  std::vector<float> g = Random(n);
  long double ref = 0;
  for (float x : g) ref += static_cast<long double>(x) * x;
  double norm = GlobalGradNorm(g.data(), n);
  EXPECT_NEAR(norm, std::sqrt(static_cast<double>(ref)), 1e-12 * norm);
}

TEST(GradClip, BlockPartialsFromShardsCombineToTheSameBits) {
  // Two "shards" split on a block boundary, each computing its own partials: gathered in
  // order they give exactly the single-buffer norm.
  const int64_t n = 5 * kNormBlock + 77;
  std::vector<float> g = Random(n);
  std::vector<double> partials;
  AppendBlockSumsOfSquares(g.data(), 2 * kNormBlock, &partials);
  AppendBlockSumsOfSquares(g.data() + 2 * kNormBlock, n - 2 * kNormBlock, &partials);
  ASSERT_EQ(partials.size(), 6u);
  EXPECT_EQ(std::sqrt(CombineBlockSums(partials)), GlobalGradNorm(g.data(), n));
}

}  // namespace
}  // namespace lockstep::optim
