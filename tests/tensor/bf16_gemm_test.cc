// Mixed-precision GEMM (precision.h): operands rounded to bf16, products accumulated in fp32.
//
// Tolerances. bf16 keeps 8 significant bits, so rounding to nearest moves a value by at most
// u = 2^-8 of itself (unit roundoff 2^-p, p = 8). A product of two rounded operands is then
// within (1+u)^2 - 1 <= 2u + u^2 < 2^-6.9 of the exact product, and a dot product within
// 2^-6.9 * sum_k |a_k b_k| of the exact one, plus fp32 accumulation error (K * 2^-24 * the same
// sum). The tests compare each element against that bound computed from its own sum of
// |terms|: a GEMM that truncated instead of rounding would still pass it (truncation errs by
// up to 2u), so the exactness of the rounding is checked separately against a double
// reference over the rounded operands, where only fp32 accumulation error remains.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "lockstep/core/bf16.h"
#include "lockstep/tensor/bf16_ops.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/threads.h"
#include "tensor/tensor_test_util.h"

namespace lockstep::tensor {
namespace {

using testing::RandomVector;

std::vector<float> Rounded(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = Bf16ToF32(F32ToBf16(v[i]));
  return r;
}

struct Ref {
  std::vector<double> value;    // alpha * sum a b + beta * c
  std::vector<double> abs_sum;  // |alpha| * sum |a b|
};

Ref RefGemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const std::vector<float>& A, int64_t lda,
            const std::vector<float>& B, int64_t ldb, double beta, const std::vector<float>& C, int64_t ldc) {
  Ref r{std::vector<double>(C.begin(), C.end()), std::vector<double>(C.size(), 0.0)};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0, a_s = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(ta ? A[k * lda + i] : A[i * lda + k]) *
                         static_cast<double>(tb ? B[j * ldb + k] : B[k * ldb + j]);
        s += p;
        a_s += std::fabs(p);
      }
      r.value[i * ldc + j] = alpha * s + beta * C[i * ldc + j];
      r.abs_sum[i * ldc + j] = std::fabs(alpha) * a_s;
    }
  return r;
}

// |got - want| <= rel * abs_sum + 1e-6 * |beta c| for every element (padding untouched).
void ExpectWithin(const std::vector<float>& got, const Ref& want, const std::vector<float>& c0, double rel, int64_t M,
                  int64_t N, int64_t ldc, const std::string& what) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i * ldc + j);
      if (j >= N) {
        ASSERT_EQ(got[at], c0[at]) << what << ": padding (" << i << ", " << j << ") changed";
        continue;
      }
      const double bound = rel * want.abs_sum[at] + 1e-6 * std::fabs(want.value[at]) + 1e-30;
      ASSERT_LE(std::fabs(got[at] - want.value[at]), bound)
          << what << ": element (" << i << ", " << j << ") got " << got[at] << " want " << want.value[at];
    }
  }
}

class Bf16GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

// fp32 accumulation of K terms: K * 2^-24 relative to the sum of |terms| (with margin 2x).
double AccumulationBound(int64_t K) { return 2.0 * static_cast<double>(K) * std::ldexp(1.0, -24); }

TEST_P(Bf16GemmTest, RoundsOperandsToNearestEvenAndAccumulatesInFp32) {
  auto [ta, tb] = GetParam();
  const int64_t M = 67, N = 45, K = 300;
  const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
  const auto A = RandomVector((ta ? K : M) * lda, 1), B = RandomVector((tb ? N : K) * ldb, 2);
  const auto C = RandomVector(M * ldc, 3);
  // Against the exact products of the rounded operands: only accumulation error remains.
  const Ref exact_rounded = RefGemm(ta, tb, M, N, K, 0.75, Rounded(A), lda, Rounded(B), ldb, -0.5, C, ldc);
  // Against the fp32 operands: the bf16 bound of the header comment.
  const Ref fp32 = RefGemm(ta, tb, M, N, K, 0.75, A, lda, B, ldb, -0.5, C, ldc);
  const double bf16_bound = 2.0 * std::ldexp(1.0, -8) + std::ldexp(1.0, -16) + AccumulationBound(K);
  for (bool emulated : {false, true}) {
    if (!emulated && !QueryBf16Support().native) continue;  // the emulated path runs everywhere
    ForceBf16Emulation(emulated);
    for (bool det : {false, true}) {
      ScopedDeterministic d(det);
      ScopedPrecision p(Precision::kBF16);
      std::vector<float> got = C;
      Gemm(ta, tb, M, N, K, 0.75f, A.data(), lda, B.data(), ldb, -0.5f, got.data(), ldc);
      const std::string what = std::string(emulated ? "emulated" : "native") + (det ? " deterministic" : "");
      ExpectWithin(got, exact_rounded, C, AccumulationBound(K), M, N, ldc, what + " vs rounded operands");
      ExpectWithin(got, fp32, C, bf16_bound, M, N, ldc, what + " vs fp32 operands");
    }
    ForceBf16Emulation(false);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, Bf16GemmTest, ::testing::Combine(::testing::Bool(), ::testing::Bool()));

// The rounding is visible: in bf16 precision 1 + 2^-9 (halfway between two bf16 values, ties
// to even: 1) times 1 is 1, in fp32 it is 1 + 2^-9.
TEST(Bf16Gemm, PrecisionSwitchRoundsOperands) {
  const float a = 1.0f + std::ldexp(1.0f, -9), b = 1.0f;
  float c = 0;
  Gemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
  EXPECT_EQ(c, a);
  {
    ScopedPrecision p(Precision::kBF16);
    Gemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
  }
  EXPECT_EQ(c, 1.0f);
  const float up = 1.0f + 3 * std::ldexp(1.0f, -9);  // halfway between 1+2^-8 and 1+2^-7: even is 1+2^-7
  {
    ScopedPrecision p(Precision::kBF16);
    Gemm(false, false, 1, 1, 1, 1.0f, &up, 1, &b, 1, 0.0f, &c, 1);
  }
  EXPECT_EQ(c, 1.0f + std::ldexp(1.0f, -7));
}

// Deterministic mode: the same bits for 1, 2 and 3 compute threads (big enough for several
// tiles), native and emulated.
TEST(Bf16Gemm, DeterministicBitsDoNotDependOnThreadCount) {
  const int64_t M = 600, N = 520, K = 700;
  const auto A = RandomVector(M * K, 4), B = RandomVector(N * K, 5);
  for (bool emulated : {false, true}) {
    if (!emulated && !QueryBf16Support().native) continue;
    ForceBf16Emulation(emulated);
    ScopedDeterministic d(true);
    ScopedPrecision p(Precision::kBF16);
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      ScopedComputeThreads t(threads);
      std::vector<float> c(M * N, 0.0f);
      Gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, c.data(), N);
      if (first.empty()) {
        first = c;
      } else {
        ASSERT_EQ(0, std::memcmp(first.data(), c.data(), c.size() * sizeof(float)))
            << threads << " threads, " << (emulated ? "emulated" : "native");
      }
    }
    ForceBf16Emulation(false);
  }
}

// An installed weight copy is read instead of rounding the operand again: a GEMM whose B lies
// inside the copied range gives the bits of the per-call rounding, and after the fp32 values
// change (without a Refresh) it still sees the copy, which is what it is for.
TEST(Bf16Gemm, WeightCopyIsReadForOperandsInsideItsRange) {
  if (!QueryBf16Support().native) GTEST_SKIP() << "no bf16 kernels: the emulated path rounds per call";
  const int64_t M = 16, N = 24, K = 32;
  const auto A = RandomVector(M * K, 6);
  auto flat = RandomVector(100 + N * K, 7);  // the weight starts 100 elements into the flat buffer
  const float* W = flat.data() + 100;
  ScopedPrecision p(Precision::kBF16);
  std::vector<float> per_call(M * N), with_copy(M * N), stale(M * N);
  Gemm(false, true, M, N, K, 1.0f, A.data(), K, W, K, 0.0f, per_call.data(), N);
  Bf16WeightCopy copy;
  copy.Refresh(flat.data(), static_cast<int64_t>(flat.size()));
  EXPECT_EQ(copy.bytes(), static_cast<int64_t>(flat.size() * 2));
  EXPECT_NE(copy.Find(W, N * K), nullptr);
  EXPECT_EQ(copy.Find(W, N * K + 1), nullptr);  // runs past the end
  EXPECT_EQ(copy.Find(A.data(), 1), nullptr);   // another buffer
  ScopedBf16Weights use(&copy);
  Gemm(false, true, M, N, K, 1.0f, A.data(), K, W, K, 0.0f, with_copy.data(), N);
  EXPECT_EQ(0, std::memcmp(per_call.data(), with_copy.data(), per_call.size() * sizeof(float)));
  for (float& v : flat) v = 0.0f;
  Gemm(false, true, M, N, K, 1.0f, A.data(), K, W, K, 0.0f, stale.data(), N);
  EXPECT_EQ(0, std::memcmp(per_call.data(), stale.data(), per_call.size() * sizeof(float)));
}

TEST(Bf16Gemm, SupportQueryNamesTheIsa) {
  const Bf16Support s = QueryBf16Support();
  EXPECT_FALSE(s.isa.empty());
  EXPECT_EQ(s.native, s.missing.empty());
  EXPECT_EQ(Bf16Warning().empty(), s.native);
  if (!s.native) {
    EXPECT_NE(Bf16Warning().find("AVX512_BF16"), std::string::npos) << Bf16Warning();
  }
}

}  // namespace
}  // namespace lockstep::tensor
