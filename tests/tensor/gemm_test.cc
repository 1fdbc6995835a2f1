#include <gtest/gtest.h>

#include <tuple>

#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/threads.h"
#include "tensor/tensor_test_util.h"

namespace lockstep::tensor {
namespace {

using testing::ExpectNear;
using testing::RandomVector;

// Naive row-major reference in double.
std::vector<double> RefGemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                            const std::vector<float>& A, int64_t lda, const std::vector<float>& B, int64_t ldb,
                            double beta, const std::vector<float>& C, int64_t ldc) {
  std::vector<double> out(C.begin(), C.end());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        double a = ta ? A[k * lda + i] : A[i * lda + k];
        double b = tb ? B[j * ldb + k] : B[k * ldb + j];
        s += a * b;
      }
      out[i * ldc + j] = alpha * s + beta * C[i * ldc + j];
    }
  return out;
}

// Inputs in [-1, 1): each product term is <= 1 in magnitude, so the fp32 error of a K-term
// dot product is bounded by about K * 2^-24 * (sum of |terms|) ~ 6e-8 * K^2 in the worst
// case, and ~6e-8 * K typically; 2e-6 * K / 64 + 1e-5 absolute covers K <= 300 with margin.
class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GemmTest, MatchesDoubleReferenceWithPaddedLeadingDims) {
  auto [ta, tb] = GetParam();
  const int64_t M = 37, N = 53, K = 71;
  const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
  auto A = RandomVector((ta ? K : M) * lda, 1);
  auto B = RandomVector((tb ? N : K) * ldb, 2);
  auto C = RandomVector(M * ldc, 3);
  for (bool det : {false, true}) {
    ScopedDeterministic d(det);
    std::vector<float> got = C;
    Gemm(ta, tb, M, N, K, 0.75f, A.data(), lda, B.data(), ldb, -0.5f, got.data(), ldc);
    auto want = RefGemm(ta, tb, M, N, K, 0.75, A, lda, B, ldb, -0.5, C, ldc);
    // The padding columns of C must be untouched.
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = N; j < ldc; ++j) want[i * ldc + j] = C[i * ldc + j];
    ExpectNear(got, want, 1e-5, 1e-5, det ? "deterministic" : "default");
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest, ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(Gemm, BetaZeroIgnoresNaNInOutput) {
  std::vector<float> A = {1, 2, 3, 4}, B = {1, 0, 0, 1};
  std::vector<float> C(4, std::numeric_limits<float>::quiet_NaN());
  Gemm(false, false, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2, 0.0f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{1, 2, 3, 4}));
}

TEST(Gemm, DeterministicModeGivesSameBitsForAnyThreadCount) {
  // Shapes include a tall-K case where a threaded GEMM is tempted to split K.
  for (auto [M, N, K] :
       {std::tuple<int64_t, int64_t, int64_t>{512, 128, 384}, {16, 16, 20000}, {128, 384, 2048}, {33, 7, 1000}}) {
    auto A = RandomVector(M * K, 10);
    auto B = RandomVector(K * N, 11);
    std::vector<float> ref;
    ScopedDeterministic d(true);
    for (int threads : {1, 2, 3}) {
      ScopedComputeThreads t(threads);
      std::vector<float> C(M * N, 0.0f);
      Gemm(true, false, M, N, K, 1.0f, A.data(), M, B.data(), N, 0.0f, C.data(), N);
      if (threads == 1) {
        ref = C;
      } else {
        EXPECT_TRUE(testing::BitEqual(C, ref)) << M << "x" << N << "x" << K << " threads " << threads;
      }
    }
  }
}

TEST(BatchedGemm, MatchesPerMatrixReference) {
  const int64_t batch = 5, M = 20, N = 12, K = 16;
  auto A = RandomVector(batch * M * K, 20);
  auto B = RandomVector(batch * N * K, 21);  // stored [N, K] (trans_b)
  auto C0 = RandomVector(batch * M * N, 22);
  for (int threads : {1, 2}) {
    for (bool det : {false, true}) {
      ScopedComputeThreads t(threads);
      ScopedDeterministic d(det);
      std::vector<float> C = C0;
      BatchedGemm(false, true, batch, M, N, K, 2.0f, A.data(), K, M * K, B.data(), K, N * K, 1.0f, C.data(), N, M * N);
      for (int64_t b = 0; b < batch; ++b) {
        std::vector<float> a(A.begin() + b * M * K, A.begin() + (b + 1) * M * K);
        std::vector<float> bb(B.begin() + b * N * K, B.begin() + (b + 1) * N * K);
        std::vector<float> c(C0.begin() + b * M * N, C0.begin() + (b + 1) * M * N);
        std::vector<float> got(C.begin() + b * M * N, C.begin() + (b + 1) * M * N);
        ExpectNear(got, RefGemm(false, true, M, N, K, 2.0, a, K, bb, K, 1.0, c, N), 1e-5, 1e-5,
                   "batch " + std::to_string(b));
      }
    }
  }
}

// Linear: out = x W^T + b. Analytic gradients of L = sum(g * out) in double are
// dx = g W, dW = g^T x, db = colsum(g); the kernel must accumulate into existing values.
TEST(Linear, ForwardAndBackwardMatchDoubleReference) {
  const int64_t n = 50, ic = 40, oc = 24;
  auto x = RandomVector(n * ic, 30), w = RandomVector(oc * ic, 31), b = RandomVector(oc, 32);
  auto g = RandomVector(n * oc, 33);
  std::vector<double> out_ref(n * oc), dx_ref(n * ic), dw_ref(oc * ic), db_ref(oc);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < oc; ++o) {
      double s = b[o];
      for (int64_t k = 0; k < ic; ++k) s += static_cast<double>(x[i * ic + k]) * w[o * ic + k];
      out_ref[i * oc + o] = s;
      db_ref[o] += g[i * oc + o];
      for (int64_t k = 0; k < ic; ++k) {
        dx_ref[i * ic + k] += static_cast<double>(g[i * oc + o]) * w[o * ic + k];
        dw_ref[o * ic + k] += static_cast<double>(g[i * oc + o]) * x[i * ic + k];
      }
    }
  // Check the analytic reference itself against finite differences for a few entries.
  auto loss = [&](const std::vector<double>& xx) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < oc; ++o) {
        double t = b[o];
        for (int64_t k = 0; k < ic; ++k) t += xx[i * ic + k] * w[o * ic + k];
        s += g[i * oc + o] * t;
      }
    return s;
  };
  auto fd = testing::FiniteDiff(testing::ToDouble(x), loss, 1e-3);  // loss is linear in x
  testing::ExpectNear(fd, dx_ref, 1e-7, 1e-7, "reference dx vs finite differences");

  std::vector<float> out(n * oc);
  LinearForward(out.data(), x.data(), w.data(), b.data(), n, ic, oc);
  ExpectNear(out, out_ref, 1e-5, 1e-5, "out");
  std::vector<float> out_nb(n * oc);
  LinearForward(out_nb.data(), x.data(), w.data(), nullptr, n, ic, oc);
  for (int64_t i = 0; i < n * oc; ++i) out_ref[i] -= b[i % oc];
  ExpectNear(out_nb, out_ref, 1e-5, 1e-5, "out without bias");

  // Start gradients at 1 to check accumulation.
  std::vector<float> dx(n * ic, 1.0f), dw(oc * ic, 1.0f), db(oc, 1.0f);
  LinearBackward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), n, ic, oc);
  for (auto& v : dx_ref) v += 1;
  for (auto& v : dw_ref) v += 1;
  for (auto& v : db_ref) v += 1;
  ExpectNear(dx, dx_ref, 1e-5, 1e-5, "dx");
  ExpectNear(dw, dw_ref, 1e-5, 1e-5, "dw");
  ExpectNear(db, db_ref, 1e-5, 1e-5, "db");
  // Nullable outputs.
  LinearBackward(nullptr, nullptr, nullptr, g.data(), x.data(), w.data(), n, ic, oc);
}

// The MLP's backward products and bias sum in one pass: the bits of MulGrad followed by
// LinearBackward's bias sum, on 1 and 2 threads (2 threads split the 200 columns at 112, not at
// a multiple of 200 / 2), accumulating onto an existing bias gradient; without one, MulGrad
// alone. The bias sum is each column's rows added in order from row 0 (a float sum, then onto
// the gradient): what makes it the same for any thread count.
TEST(Linear, MulGradColumnSumGivesTheTwoPassBits) {
  const int64_t n = 301, c = 200;
  auto grad = RandomVector(n * c, 34, 2.0f), dout = RandomVector(n * c, 35);
  std::vector<float> two(n * c), db_two(c, 0.5f);
  MulGrad(two.data(), grad.data(), dout.data(), n * c, /*accumulate=*/false);
  LinearBackward(nullptr, nullptr, db_two.data(), two.data(), nullptr, nullptr, n, 0, c);
  for (int64_t j = 0; j < c; ++j) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += two[i * c + j];
    ASSERT_EQ(db_two[j], 0.5f + sum) << "column " << j;
  }
  for (int threads : {1, 2}) {
    ScopedComputeThreads t(threads);
    std::vector<float> one = grad, db_one(c, 0.5f);
    MulGradColumnSum(one.data(), one.data(), dout.data(), db_one.data(), n, c);  // in place, as the MLP runs it
    EXPECT_TRUE(testing::BitEqual(one, two)) << threads;
    EXPECT_TRUE(testing::BitEqual(db_one, db_two)) << threads;
    std::vector<float> only(n * c);
    MulGradColumnSum(only.data(), grad.data(), dout.data(), nullptr, n, c);
    EXPECT_TRUE(testing::BitEqual(only, two)) << threads;
  }
}

}  // namespace
}  // namespace lockstep::tensor
