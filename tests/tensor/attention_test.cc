// Causal self-attention against a double-precision reference (forward, analytic backward,
// and the analytic backward against finite differences).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "lockstep/tensor/attention_kernel.h"
#include "lockstep/tensor/causal_softmax.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/threads.h"
#include "tensor/tensor_test_util.h"

namespace lockstep::tensor {
namespace {

using testing::ExpectNear;
using testing::RandomVector;

struct AttRef {
  std::vector<double> out, att, dqkv;
};

// Forward and (if dout given) backward in double.
AttRef RefAttention(const std::vector<double>& qkv, const std::vector<double>* dout, int64_t B, int64_t T, int64_t C,
                    int64_t H) {
  const int64_t hs = C / H, C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(double(hs));
  AttRef r{std::vector<double>(B * T * C), std::vector<double>(B * H * T * T), std::vector<double>(B * T * C3)};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      auto q = [&](int64_t t, int64_t d) { return qkv[(b * T + t) * C3 + h * hs + d]; };
      auto k = [&](int64_t t, int64_t d) { return qkv[(b * T + t) * C3 + C + h * hs + d]; };
      auto v = [&](int64_t t, int64_t d) { return qkv[(b * T + t) * C3 + 2 * C + h * hs + d]; };
      double* P = r.att.data() + (b * H + h) * T * T;
      for (int64_t i = 0; i < T; ++i) {
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t d = 0; d < hs; ++d) s += q(i, d) * k(j, d);
          P[i * T + j] = s * scale;
          mx = std::max(mx, P[i * T + j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += (P[i * T + j] = std::exp(P[i * T + j] - mx));
        for (int64_t j = 0; j <= i; ++j) P[i * T + j] /= sum;
        for (int64_t d = 0; d < hs; ++d) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += P[i * T + j] * v(j, d);
          r.out[(b * T + i) * C + h * hs + d] = o;
        }
      }
      if (dout == nullptr) continue;
      auto dO = [&](int64_t t, int64_t d) { return (*dout)[(b * T + t) * C + h * hs + d]; };
      auto dq = [&](int64_t t, int64_t d) -> double& { return r.dqkv[(b * T + t) * C3 + h * hs + d]; };
      auto dk = [&](int64_t t, int64_t d) -> double& { return r.dqkv[(b * T + t) * C3 + C + h * hs + d]; };
      auto dv = [&](int64_t t, int64_t d) -> double& { return r.dqkv[(b * T + t) * C3 + 2 * C + h * hs + d]; };
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> dP(i + 1);
        double dot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < hs; ++d) dP[j] += dO(i, d) * v(j, d);
          dot += dP[j] * P[i * T + j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          double dS = P[i * T + j] * (dP[j] - dot) * scale;
          for (int64_t d = 0; d < hs; ++d) {
            dq(i, d) += dS * k(j, d);
            dk(j, d) += dS * q(i, d);
            dv(j, d) += P[i * T + j] * dO(i, d);
          }
        }
      }
    }
  return r;
}

TEST(Attention, ReferenceBackwardMatchesFiniteDifferences) {
  const int64_t B = 2, T = 5, C = 6, H = 2;
  auto qkv = testing::ToDouble(RandomVector(B * T * 3 * C, 1));
  auto g = testing::ToDouble(RandomVector(B * T * C, 2));
  AttRef r = RefAttention(qkv, &g, B, T, C, H);
  auto loss = [&](const std::vector<double>& x) { return testing::Dot(RefAttention(x, nullptr, B, T, C, H).out, g); };
  testing::ExpectNear(testing::FiniteDiff(qkv, loss), r.dqkv, 1e-8, 1e-6, "dqkv vs FD");
}

void CheckAgainstReference(int64_t B, int64_t T, int64_t C, int64_t H) {
  auto qkv = RandomVector(B * T * 3 * C, 3, 2.0f);
  auto g = RandomVector(B * T * C, 4);
  auto gd = testing::ToDouble(g);
  AttRef r = RefAttention(testing::ToDouble(qkv), &gd, B, T, C, H);
  std::vector<float> out(B * T * C), att(B * H * T * T, 99.0f);
  AttentionForward(out.data(), att.data(), qkv.data(), B, T, C, H);
  // Scores are O(hs) sums of products of O(2) values; softmax and the PV sum are
  // well-conditioned: ~1e-6 relative, so 2e-5 absolute on O(1) outputs.
  char buf[64];  // (snprintf: GCC 12 gives a false -Wrestrict on chained string +)
  std::snprintf(buf, sizeof buf, "B%ld T%ld", static_cast<long>(B), static_cast<long>(T));
  const std::string what = buf;
  // Above the diagonal the kernel writes only a band of zeros: the 99s must stay (or be 0).
  for (int64_t u = 0; u < B * H; ++u)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = i + 1; j < T; ++j) {
        float& a = att[(u * T + i) * T + j];
        ASSERT_TRUE(a == 0.0f || a == 99.0f) << what << " att above the diagonal at " << i << "," << j << ": " << a;
        a = 0.0f;
      }
  ExpectNear(att, r.att, 2e-6, 2e-5, what + " att");
  ExpectNear(out, r.out, 2e-5, 2e-5, what + " out");
  std::vector<float> dqkv(qkv.size(), 0.25f);
  for (auto& x : r.dqkv) x += 0.25;
  AttentionBackward(dqkv.data(), g.data(), qkv.data(), att.data(), B, T, C, H);
  ExpectNear(dqkv, r.dqkv, 5e-5, 5e-5, what + " dqkv");
}

TEST(Attention, MatchesReferenceOddSizes) { CheckAgainstReference(2, 70, 48, 3); }
TEST(Attention, MatchesReferenceGptShape) { CheckAgainstReference(1, 128, 128, 4); }
TEST(Attention, MatchesReferenceT1) { CheckAgainstReference(3, 1, 8, 2); }

TEST(Attention, SameBitsForAnyThreadCount) {
  const int64_t B = 3, T = 64, C = 64, H = 4;
  auto qkv = RandomVector(B * T * 3 * C, 5);
  auto g = RandomVector(B * T * C, 6);
  std::vector<float> ref_out, ref_dqkv;
  for (int threads : {1, 2, 3}) {
    ScopedComputeThreads t(threads);
    std::vector<float> out(B * T * C), att(B * H * T * T), dqkv(qkv.size(), 0.0f);
    AttentionForward(out.data(), att.data(), qkv.data(), B, T, C, H);
    AttentionBackward(dqkv.data(), g.data(), qkv.data(), att.data(), B, T, C, H);
    if (threads == 1) {
      ref_out = out;
      ref_dqkv = dqkv;
    } else {
      EXPECT_TRUE(testing::BitEqual(out, ref_out)) << threads;
      EXPECT_TRUE(testing::BitEqual(dqkv, ref_dqkv)) << threads;
    }
  }
}

// Overwrite mode (a gradient nothing has written yet) writes every element of dqkv once: the
// same bits as accumulating into zeros, whatever was in the buffer; accumulate mode adds.
TEST(Attention, BackwardOverwriteEqualsAccumulatingIntoZero) {
  const int64_t B = 2, T = 37, C = 48, H = 3;
  auto qkv = RandomVector(B * T * 3 * C, 9);
  auto g = RandomVector(B * T * C, 10);
  std::vector<float> out(B * T * C), att(B * H * T * T);
  AttentionForward(out.data(), att.data(), qkv.data(), B, T, C, H);
  std::vector<float> acc(qkv.size(), 0.0f), over(qkv.size(), std::nanf("")), twice(qkv.size(), 0.0f);
  AttentionBackward(acc.data(), g.data(), qkv.data(), att.data(), B, T, C, H, /*accumulate=*/true);
  AttentionBackward(over.data(), g.data(), qkv.data(), att.data(), B, T, C, H, /*accumulate=*/false);
  EXPECT_TRUE(testing::BitEqual(over, acc));
  AttentionBackward(twice.data(), g.data(), qkv.data(), att.data(), B, T, C, H, /*accumulate=*/true);
  AttentionBackward(twice.data(), g.data(), qkv.data(), att.data(), B, T, C, H, /*accumulate=*/true);
  for (size_t i = 0; i < acc.size(); ++i) ASSERT_EQ(twice[i], acc[i] + acc[i]) << i;
}

// The AVX-512 build of the micro-kernel must give the AVX2 build's bits (a run's results may
// not depend on the machine's vector width): every row count, column counts around the panel
// widths (16 and 32, masked tails), row-major and transposed A, overwrite and accumulate.
TEST(AttentionKernel, Avx512GivesTheAvx2Bits) {
  if (!internal::HasAvx512()) GTEST_SKIP() << "no AVX-512 on this processor";
  const int64_t K = 37, ld = 80;
  auto a = RandomVector(K * ld, 7), b = RandomVector(K * ld, 8), c0 = RandomVector(8 * ld, 9);
  int compared = 0;
  for (int rows = 1; rows <= internal::kRowBlock; ++rows)
    for (int64_t ncols : {1, 7, 8, 15, 16, 17, 31, 32, 33, 48, 64, 70})
      for (bool transposed : {false, true})
        for (bool accumulate : {false, true}) {
          std::vector<float> c2 = c0, c5 = c0;
          const int64_t a_rs = transposed ? 1 : ld, a_ks = transposed ? ld : 1;
          internal::MicroGemmAvx2(rows, K, a.data(), a_rs, a_ks, b.data(), ld, ncols, c2.data(), ld, 0.37f, accumulate);
          internal::MicroGemmAvx512(rows, K, a.data(), a_rs, a_ks, b.data(), ld, ncols, c5.data(), ld, 0.37f,
                                    accumulate);
          ASSERT_TRUE(testing::BitEqual(c2, c5)) << rows << " rows, " << ncols << " cols";
          ASSERT_NE(c2, c0);
          ++compared;
        }
  EXPECT_EQ(compared, 6 * 12 * 4);
}

// Same for the row softmax and its backward: every row length up to 3 vectors and the GPT
// shapes, the band of zeros after it, scores far enough below the max that exp underflows to 0.
TEST(AttentionKernel, Avx512SoftmaxGivesTheAvx2Bits) {
  if (!internal::HasAvx512()) GTEST_SKIP() << "no AVX-512 on this processor";
  const int64_t T = 136;
  auto scores = RandomVector(T, 11, 30.0f), dp = RandomVector(T, 12);
  scores[5] = -200.0f;  // exp underflows to exactly 0 (one lane of the first vector)
  int compared = 0;
  for (int64_t n = 1; n <= T - 8; n += (n < 50 ? 1 : 13)) {
    for (int64_t end : {n, n + 5, n + 8}) {
      std::vector<float> p2(T + 1, 7.0f), p5(T + 1, 7.0f);
      std::copy(scores.begin(), scores.begin() + n, p2.begin());
      std::copy(scores.begin(), scores.begin() + n, p5.begin());
      internal::CausalSoftmaxRow(p2.data(), n, end);
      internal::CausalSoftmaxRow512(p5.data(), n, end);
      ASSERT_TRUE(testing::BitEqual(p2, p5)) << "forward, " << n << " columns";
      ASSERT_EQ(p2[end], 7.0f) << "wrote past the band";
      if (end > n) {
        ASSERT_EQ(p2[end - 1], 0.0f);
      }
      std::vector<float> d2 = dp, d5 = dp;
      internal::CausalSoftmaxBackwardRow(d2.data(), p2.data(), n, end, 0.3f);
      internal::CausalSoftmaxBackwardRow512(d5.data(), p2.data(), n, end, 0.3f);
      ASSERT_TRUE(testing::BitEqual(d2, d5)) << "backward, " << n << " columns";
      ASSERT_NE(d2[0], dp[0]);
      ++compared;
    }
  }
  EXPECT_GT(compared, 150);
}

}  // namespace
}  // namespace lockstep::tensor
