// LayerNorm, GELU, ReLU and elementwise kernels against double-precision references.
#include <gtest/gtest.h>

#include <cmath>

#include "lockstep/tensor/kernels.h"
#include "tensor/tensor_test_util.h"

namespace lockstep::tensor {
namespace {

using testing::ExpectNear;
using testing::RandomVector;

struct LnRef {
  std::vector<double> out, mean, rstd;
};

LnRef RefLayerNorm(const std::vector<double>& x, const std::vector<float>& w, const std::vector<float>& b, int64_t n,
                   int64_t c, double eps) {
  LnRef r{std::vector<double>(n * c), std::vector<double>(n), std::vector<double>(n)};
  for (int64_t i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < c; ++j) m += x[i * c + j];
    m /= c;
    for (int64_t j = 0; j < c; ++j) v += (x[i * c + j] - m) * (x[i * c + j] - m);
    double rs = 1.0 / std::sqrt(v / c + eps);
    for (int64_t j = 0; j < c; ++j) r.out[i * c + j] = (x[i * c + j] - m) * rs * w[j] + b[j];
    r.mean[i] = m;
    r.rstd[i] = rs;
  }
  return r;
}

TEST(LayerNorm, ForwardAndBackwardMatchDoubleReference) {
  const int64_t n = 300, c = 72;  // 300 rows: more than one fixed row chunk (128)
  const float eps = 1e-5f;
  auto x = RandomVector(n * c, 1, 2.0f), w = RandomVector(c, 2), b = RandomVector(c, 3);
  auto g = RandomVector(n * c, 4);
  for (int64_t i = 0; i < n * c; ++i) x[i] += static_cast<float>(i % 7);  // non-zero means
  LnRef ref = RefLayerNorm(testing::ToDouble(x), w, b, n, c, eps);

  std::vector<float> out(n * c), mean(n), rstd(n);
  LayerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c, eps);
  // fp32 two-pass statistics over 72 values: relative error ~1e-6; outputs are O(3).
  ExpectNear(out, ref.out, 1e-5, 1e-5, "out");
  ExpectNear(mean, ref.mean, 1e-5, 1e-6, "mean");
  ExpectNear(rstd, ref.rstd, 0, 1e-5, "rstd");

  // Analytic double gradients of L = sum(g * out).
  std::vector<double> dx(n * c), dw(c), db(c);
  for (int64_t i = 0; i < n; ++i) {
    double sdn = 0, sdnx = 0;
    for (int64_t j = 0; j < c; ++j) {
      double xh = (x[i * c + j] - ref.mean[i]) * ref.rstd[i];
      double dn = static_cast<double>(g[i * c + j]) * w[j];
      sdn += dn;
      sdnx += dn * xh;
      dw[j] += g[i * c + j] * xh;
      db[j] += g[i * c + j];
    }
    for (int64_t j = 0; j < c; ++j) {
      double xh = (x[i * c + j] - ref.mean[i]) * ref.rstd[i];
      double dn = static_cast<double>(g[i * c + j]) * w[j];
      dx[i * c + j] = (dn - sdn / c - xh * sdnx / c) * ref.rstd[i];
    }
  }
  // The analytic formula against finite differences on the first two rows.
  {
    const int64_t rows = 2;
    std::vector<double> x2(x.begin(), x.begin() + rows * c);
    auto loss = [&](const std::vector<double>& xx) {
      LnRef r = RefLayerNorm(xx, w, b, rows, c, eps);
      double s = 0;
      for (int64_t k = 0; k < rows * c; ++k) s += g[k] * r.out[k];
      return s;
    };
    std::vector<double> dx2(dx.begin(), dx.begin() + rows * c);
    testing::ExpectNear(testing::FiniteDiff(x2, loss), dx2, 1e-6, 1e-5, "reference vs FD");
  }
  std::vector<float> gx(n * c, 0.5f), gw(c, 0.5f), gb(c, 0.5f);  // accumulate onto 0.5
  LayerNormBackward(gx.data(), gw.data(), gb.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(), n, c);
  for (auto* v : {&dx, &dw, &db})
    for (auto& e : *v) e += 0.5;
  // dx: O(1) values from differences of O(1) terms: 2e-5 absolute. dw/db sum 300 rows.
  ExpectNear(gx, dx, 2e-5, 1e-5, "dinp");
  ExpectNear(gw, dw, 1e-4, 1e-5, "dweight");
  ExpectNear(gb, db, 1e-4, 1e-5, "dbias");
}

double RefGelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

double RefGeluGrad(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  double u = k * (x + 0.044715 * x * x * x);
  double t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

TEST(Gelu, ForwardAndBackwardMatchTanhApproximation) {
  const int64_t n = 10007;  // odd: exercises the masked tail
  auto x = RandomVector(n, 5, 8.0f);
  x[0] = 0.0f;
  x[1] = -20.0f;
  x[2] = 20.0f;
  x[3] = 1e-4f;
  auto g = RandomVector(n, 6);
  std::vector<double> want(n), dwant(n);
  for (int64_t i = 0; i < n; ++i) {
    want[i] = RefGelu(x[i]);
    dwant[i] = 0.25 + RefGeluGrad(x[i]) * g[i];
  }
  // The derivative formula against finite differences.
  for (int64_t i = 0; i < 200; ++i) {
    double h = 1e-5, fd = (RefGelu(x[i] + h) - RefGelu(x[i] - h)) / (2 * h);
    ASSERT_NEAR(fd, RefGeluGrad(x[i]), 1e-8) << x[i];
  }
  std::vector<float> out(n);
  GeluForward(out.data(), x.data(), n);
  // x / (1 + exp(-2u)) with a ~2 ulp exp. The fp32 argument 2u itself carries ~1 ulp of
  // rounding, which exp turns into |2u| * 6e-8 relative error: for outputs that matter
  // (|2u| < 20) that is < 2e-6 relative; the far negative tail is below 1e-9 absolute.
  ExpectNear(out, want, 1e-9, 2e-6, "gelu");
  std::vector<float> dx(n, 0.25f);
  GeluBackward(dx.data(), x.data(), g.data(), n);
  // The gradient crosses zero near x = -0.75, so a small absolute term is needed there.
  ExpectNear(dx, dwant, 1e-6, 2e-6, "gelu grad");
  // In place.
  std::vector<float> inplace = x;
  GeluForward(inplace.data(), inplace.data(), n);
  EXPECT_TRUE(testing::BitEqual(inplace, out));
}

// BiasGelu adds a bias row and computes gelu and gelu' in one pass; the MLP's step then
// multiplies by the kept derivative (MulGrad). Both must give exactly the bits of the bias add
// and the two GELU passes, so a run's weights do not depend on which path an op took; and the
// overwrite forms equal accumulating into 0. 73 rows of 137 columns: a vector tail every row.
// (On a processor with AVX-512, BiasGelu runs its 16-lane build and the two passes their 8-lane
// one: this is also the test that the two builds give the same bits.)
TEST(Gelu, KeptDerivativeGivesTheTwoPassBits) {
  const int64_t rows = 73, cols = 137, n = rows * cols;
  auto z = RandomVector(n, 7, 8.0f);
  auto bias = RandomVector(cols, 9, 2.0f);
  auto g = RandomVector(n, 8);
  std::vector<float> x(n);  // the biased pre-activation, for the two-pass reference
  for (int64_t i = 0; i < n; ++i) x[i] = z[i] + bias[i % cols];
  std::vector<float> out(n), two_pass(n), dx_two(n, 0.0f), dx_kept(n, 0.0f), dx_write(n, 123.0f);
  GeluForward(two_pass.data(), x.data(), n);
  GeluBackward(dx_two.data(), x.data(), g.data(), n);
  std::vector<float> kept = z;
  BiasGelu(out.data(), kept.data(), bias.data(), rows, cols, /*keep_grad=*/true);
  EXPECT_TRUE(testing::BitEqual(out, two_pass));
  EXPECT_FALSE(testing::BitEqual(kept, x));  // the input now holds the derivative
  MulGrad(dx_kept.data(), kept.data(), g.data(), n, /*accumulate=*/true);
  EXPECT_TRUE(testing::BitEqual(dx_kept, dx_two));
  MulGrad(dx_write.data(), kept.data(), g.data(), n, /*accumulate=*/false);
  EXPECT_TRUE(testing::BitEqual(dx_write, dx_two));
  std::vector<float> dx_gw(n, 123.0f);
  GeluBackward(dx_gw.data(), x.data(), g.data(), n, /*accumulate=*/false);
  EXPECT_TRUE(testing::BitEqual(dx_gw, dx_two));
  // Accumulating onto an existing gradient: the same bits as the two-pass backward there too.
  std::vector<float> acc_kept(n, 0.25f), acc_two(n, 0.25f);
  MulGrad(acc_kept.data(), kept.data(), g.data(), n, /*accumulate=*/true);
  GeluBackward(acc_two.data(), x.data(), g.data(), n);
  EXPECT_TRUE(testing::BitEqual(acc_kept, acc_two));
  EXPECT_FALSE(testing::BitEqual(acc_kept, dx_two));
  // Without keep_grad (evaluation) z is left alone; without a bias it is plain GELU.
  std::vector<float> untouched = z, eval_out(n);
  BiasGelu(eval_out.data(), untouched.data(), bias.data(), rows, cols, /*keep_grad=*/false);
  EXPECT_TRUE(testing::BitEqual(eval_out, two_pass));
  EXPECT_TRUE(testing::BitEqual(untouched, z));
  std::vector<float> unbiased = x;
  BiasGelu(eval_out.data(), unbiased.data(), nullptr, rows, cols, /*keep_grad=*/false);
  EXPECT_TRUE(testing::BitEqual(eval_out, two_pass));
}

TEST(Relu, ForwardBackward) {
  std::vector<float> x = {-1, 0, 2, -3, 4}, g = {1, 2, 3, 4, 5};
  std::vector<float> y(5), dx(5, 1.0f);
  ReluForward(y.data(), x.data(), 5);
  EXPECT_EQ(y, (std::vector<float>{0, 0, 2, 0, 4}));
  ReluBackward(dx.data(), y.data(), g.data(), 5);
  EXPECT_EQ(dx, (std::vector<float>{1, 1, 4, 1, 6}));
}

TEST(Elementwise, AddScaleAxpyAndReductions) {
  const int64_t n = 100003;  // several fixed reduction chunks plus a tail
  auto a = RandomVector(n, 7), b = RandomVector(n, 8);
  std::vector<float> out(n), acc = a;
  Add(out.data(), a.data(), b.data(), n);
  AddInPlace(acc.data(), b.data(), n);
  EXPECT_TRUE(testing::BitEqual(out, acc));
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]);
  Scale(acc.data(), 0.5f, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], out[i] * 0.5f);
  std::vector<float> ax = a;
  Axpy(ax.data(), 3.0f, b.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(ax[i], std::fma(3.0f, b[i], a[i]));
  double ss = 0, s = 0;
  for (float v : a) {
    ss += static_cast<double>(v) * v;
    s += v;
  }
  // Products of floats are exact in double; 1e5 double additions: relative error < 1e-11.
  EXPECT_NEAR(SumSquares(a.data(), n), ss, 1e-11 * ss);
  EXPECT_NEAR(Sum(a.data(), n), s, 1e-11 * n);
  EXPECT_EQ(SumSquares(a.data(), 0), 0.0);
  EXPECT_EQ(SumSquares(a.data(), 3), ss = double(a[0]) * a[0] + double(a[1]) * a[1] + double(a[2]) * a[2]);
}

}  // namespace
}  // namespace lockstep::tensor
