// Softmax, cross-entropy, embedding and max pooling against double references.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lockstep/tensor/kernels.h"
#include "tensor/tensor_test_util.h"

namespace lockstep::tensor {
namespace {

using testing::ExpectNear;
using testing::RandomVector;

TEST(Softmax, RowsMatchDoubleReference) {
  const int64_t rows = 33, cols = 257;
  auto x = RandomVector(rows * cols, 1, 20.0f);
  std::vector<double> want(rows * cols);
  for (int64_t i = 0; i < rows; ++i) {
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, double(x[i * cols + j]));
    for (int64_t j = 0; j < cols; ++j) s += std::exp(x[i * cols + j] - mx);
    for (int64_t j = 0; j < cols; ++j) want[i * cols + j] = std::exp(x[i * cols + j] - mx) / s;
  }
  std::vector<float> out(rows * cols);
  SoftmaxRows(out.data(), x.data(), rows, cols);
  // exp error ~2 ulp, 257-term float sum ~1e-6 relative.
  ExpectNear(out, want, 1e-9, 3e-6, "softmax");
  SoftmaxRows(x.data(), x.data(), rows, cols);  // in place
  EXPECT_TRUE(testing::BitEqual(x, out));
}

TEST(SoftmaxCrossEntropy, LossAndGradientWithIgnoredRows) {
  const int64_t n = 40, v = 101;
  const float dscale = 1.0f / 37;
  auto logits = RandomVector(n * v, 2, 5.0f);
  auto targets = testing::RandomIds(n, v, 3);
  targets[3] = -1;
  targets[10] = -100;
  targets[39] = -1;
  std::vector<double> loss_ref(n), grad_ref(n * v);
  double mean_ref = 0;
  int counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0) continue;
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, double(logits[i * v + j]));
    for (int64_t j = 0; j < v; ++j) s += std::exp(logits[i * v + j] - mx);
    loss_ref[i] = std::log(s) + mx - logits[i * v + targets[i]];
    for (int64_t j = 0; j < v; ++j)
      grad_ref[i * v + j] = (std::exp(logits[i * v + j] - mx) / s - (j == targets[i])) * dscale;
    mean_ref += loss_ref[i];
    ++counted;
  }
  mean_ref /= counted;
  // The gradient formula against finite differences of the double loss for one row.
  {
    std::vector<double> row(logits.begin() + v, logits.begin() + 2 * v);
    auto f = [&](const std::vector<double>& r) {
      double mx = -1e300, s = 0;
      for (double e : r) mx = std::max(mx, e);
      for (double e : r) s += std::exp(e - mx);
      return (std::log(s) + mx - r[targets[1]]) * dscale;
    };
    std::vector<double> want(grad_ref.begin() + v, grad_ref.begin() + 2 * v);
    testing::ExpectNear(testing::FiniteDiff(row, f), want, 1e-9, 1e-6, "reference vs FD");
  }
  std::vector<float> losses(n, 123.0f), dlogits(n * v, 123.0f);
  double mean = SoftmaxCrossEntropy(losses.data(), dlogits.data(), logits.data(), targets.data(), n, v, dscale);
  // Losses are O(5): float log-sum-exp is good to ~1e-6 relative.
  EXPECT_NEAR(mean, mean_ref, 1e-5);
  ExpectNear(losses, loss_ref, 1e-5, 1e-6, "losses");
  ExpectNear(dlogits, grad_ref, 1e-9, 3e-6, "dlogits");  // overwritten, ignored rows zero
  // Without outputs: same mean. In place (dlogits aliasing logits) too.
  EXPECT_EQ(SoftmaxCrossEntropy(nullptr, nullptr, logits.data(), targets.data(), n, v, 1), mean);
  std::vector<float> alias = logits;
  EXPECT_EQ(SoftmaxCrossEntropy(nullptr, alias.data(), alias.data(), targets.data(), n, v, dscale), mean);
  EXPECT_TRUE(testing::BitEqual(alias, dlogits));
  std::vector<int32_t> none(n, -1);
  EXPECT_EQ(SoftmaxCrossEntropy(nullptr, nullptr, logits.data(), none.data(), n, v, 1), 0.0);
}

TEST(Embedding, ForwardGathersAndBackwardAccumulatesDuplicates) {
  const int64_t vocab = 10, c = 130, n = 64;  // c > 64: column blocks split over threads
  auto table = RandomVector(vocab * c, 4);
  auto ids = testing::RandomIds(n, vocab, 5);
  ids[0] = ids[1] = ids[2] = 7;
  std::vector<float> out(n * c);
  EmbeddingForward(out.data(), ids.data(), table.data(), n, c);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) ASSERT_EQ(out[i * c + j], table[ids[i] * c + j]);
  auto g = RandomVector(n * c, 6);
  std::vector<float> dt(vocab * c, 1.0f);
  EmbeddingBackward(dt.data(), ids.data(), g.data(), n, c);
  // Exact expectation: additions in order of i, in float, as the kernel promises.
  std::vector<float> want(vocab * c, 1.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) want[ids[i] * c + j] += g[i * c + j];
  EXPECT_TRUE(testing::BitEqual(dt, want));
}

// Reference pooling: first maximum in window order (row-major), exact values.
void RefPool(const std::vector<float>& x, int64_t planes, int64_t H, int64_t W, std::vector<float>& out,
             std::vector<int32_t>& am) {
  out.assign(planes * H * W / 4, 0.0f);
  am.assign(out.size(), -1);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < H / 2; ++oy)
      for (int64_t ox = 0; ox < W / 2; ++ox) {
        int best = -1;
        float bv = -std::numeric_limits<float>::infinity();
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) {
            int idx = static_cast<int>((2 * oy + dy) * W + 2 * ox + dx);
            if (x[p * H * W + idx] > bv) {
              bv = x[p * H * W + idx];
              best = idx;
            }
          }
        int64_t o = p * (H / 2) * (W / 2) + oy * (W / 2) + ox;
        out[o] = bv;
        am[o] = best;
      }
}

class MaxPool2x2Test : public ::testing::TestWithParam<int64_t> {};

TEST_P(MaxPool2x2Test, ForwardArgmaxTiesBackwardAndFusedRelu) {
  const int64_t N = 2, C = 3, H = 6, W = GetParam();  // OW = 4, 7, 8, 17: vector tails
  auto x = RandomVector(N * C * H * W, 7);
  // A tie in the first window of plane 0: the first (row-major) maximum wins.
  x[0] = x[1] = x[W] = x[W + 1] = 5.0f;
  // A window of plane 1 that is all negative (fused ReLU: output 0, no gradient).
  for (int64_t k : {0L, 1L, W, W + 1}) x[H * W + k] = -1.0f - k;
  std::vector<float> want;
  std::vector<int32_t> want_am;
  RefPool(x, N * C, H, W, want, want_am);
  std::vector<float> out(want.size());
  std::vector<int32_t> am(out.size());
  MaxPool2x2Forward(out.data(), am.data(), x.data(), N, C, H, W);
  EXPECT_TRUE(testing::BitEqual(out, want));
  EXPECT_EQ(am, want_am);
  EXPECT_EQ(am[0], 0);
  auto g = RandomVector(out.size(), 8);
  std::vector<float> dx(x.size(), 0.5f), dx_want(x.size(), 0.5f);
  MaxPool2x2Backward(dx.data(), am.data(), g.data(), N, C, H, W);
  for (size_t o = 0; o < out.size(); ++o) {
    int64_t p = o / ((H / 2) * (W / 2));
    dx_want[p * H * W + am[o]] += g[o];
  }
  EXPECT_TRUE(testing::BitEqual(dx, dx_want));

  // Fused: pool(relu(x)) equals relu(pool(x)); gradient only where the output is > 0.
  std::vector<float> fused(out.size());
  std::vector<int32_t> fam(out.size());
  ReluMaxPool2x2Forward(fused.data(), fam.data(), x.data(), N, C, H, W);
  EXPECT_EQ(fam, want_am);
  for (size_t o = 0; o < out.size(); ++o) ASSERT_EQ(fused[o], std::max(want[o], 0.0f)) << o;
  const int64_t neg_window = (H / 2) * (W / 2);  // first output of plane 1
  EXPECT_EQ(fused[neg_window], 0.0f);
  std::vector<float> fdx(x.size(), 0.5f), fdx_want(x.size(), 0.5f);
  ReluMaxPool2x2Backward(fdx.data(), fam.data(), fused.data(), g.data(), N, C, H, W);
  for (size_t o = 0; o < out.size(); ++o) {
    int64_t p = o / ((H / 2) * (W / 2));
    if (fused[o] > 0) fdx_want[p * H * W + am[o]] += g[o];
  }
  EXPECT_TRUE(testing::BitEqual(fdx, fdx_want));

  // Overwriting (a fresh gradient buffer, garbage in it) gives what zeroing and adding gives,
  // for a -0 gradient too (0 + -0 = +0).
  g[1] = -0.0f;
  for (bool relu : {false, true}) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> over(x.size(), nan), zeroed(x.size(), 0.0f);
    if (relu) {
      ReluMaxPool2x2Backward(over.data(), fam.data(), fused.data(), g.data(), N, C, H, W, /*accumulate=*/false);
      ReluMaxPool2x2Backward(zeroed.data(), fam.data(), fused.data(), g.data(), N, C, H, W);
    } else {
      MaxPool2x2Backward(over.data(), am.data(), g.data(), N, C, H, W, /*accumulate=*/false);
      MaxPool2x2Backward(zeroed.data(), am.data(), g.data(), N, C, H, W);
    }
    EXPECT_TRUE(testing::BitEqual(over, zeroed)) << relu;
    EXPECT_FALSE(std::signbit(zeroed[am[1]])) << relu;
  }

  // NaN propagates, through the fused ReLU too.
  x[2] = std::numeric_limits<float>::quiet_NaN();
  MaxPool2x2Forward(out.data(), am.data(), x.data(), N, C, H, W);
  EXPECT_TRUE(std::isnan(out[1]));
  ReluMaxPool2x2Forward(fused.data(), fam.data(), x.data(), N, C, H, W);
  EXPECT_TRUE(std::isnan(fused[1]));
}

INSTANTIATE_TEST_SUITE_P(Widths, MaxPool2x2Test, ::testing::Values(8, 14, 16, 34));

}  // namespace
}  // namespace lockstep::tensor
