// Layers in bf16 precision (tensor/precision.h) against the same layers in fp32.
//
// The bound. bf16 keeps p = 8 significant bits, so rounding an operand to nearest changes it
// by at most u = 2^-8 of its value; a product of two rounded operands by at most 2u + u^2. A
// GEMM or convolution output is a sum of K such products accumulated in fp32, so it differs
// from the exact sum by at most (2u + u^2 + K 2^-24) * S, where S is the sum of the |terms|;
// the fp32 reference itself is within K 2^-24 * S of exact. Each element is checked against
// (2u + u^2 + 2 K 2^-24) * S with S computed from the absolute values of its own operands.
// Truncating instead of rounding (error up to 2u per operand) or rounding only one operand
// the wrong way shows up in tensor/bf16_gemm_test; here the point is that every GEMM and
// convolution of a layer's forward and backward runs in bf16 and stays within the bound, on
// the bf16 kernels and on the emulated path. Layers without a product must not change at all.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/nn/activation.h"
#include "lockstep/nn/conv2d.h"
#include "lockstep/nn/cross_entropy.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/nn/layer_norm.h"
#include "lockstep/nn/linear.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/threads.h"
#include "nn/grad_check.h"

namespace lockstep::nn {
namespace {

using autograd::Tape;
using autograd::Variable;
using tensor::Precision;
using testing::Leaf;
using testing::ProbeLoss;
using testing::RandomVector;

double Bound(int64_t K) {
  const double u = std::ldexp(1.0, -8);
  return 2 * u + u * u + 2.0 * static_cast<double>(K) * std::ldexp(1.0, -24);
}

void ExpectWithin(const std::vector<float>& bf16, const std::vector<float>& fp32, const std::vector<double>& abs_sum,
                  int64_t K, const std::string& what) {
  ASSERT_EQ(bf16.size(), fp32.size()) << what;
  ASSERT_EQ(abs_sum.size(), fp32.size()) << what;
  bool changed = false;
  for (size_t i = 0; i < fp32.size(); ++i) {
    ASSERT_LE(std::fabs(static_cast<double>(bf16[i]) - fp32[i]), Bound(K) * abs_sum[i] + 1e-30)
        << what << " element " << i << ": bf16 " << bf16[i] << " fp32 " << fp32[i] << " sum|terms| " << abs_sum[i];
    changed |= bf16[i] != fp32[i];
  }
  EXPECT_TRUE(changed) << what << ": identical to fp32, bf16 was not used";
}

// The precisions a test runs: bf16 kernels where this processor has them, and the emulated
// path (fp32 kernels over rounded operands) everywhere.
struct Mode {
  bool emulated;
  const char* name;
};
std::vector<Mode> Bf16Modes() {
  std::vector<Mode> m;
  if (tensor::QueryBf16Support().native) m.push_back({false, "native"});
  m.push_back({true, "emulated"});
  return m;
}

class ScopedBf16 {
 public:
  explicit ScopedBf16(const Mode& m) : p_(Precision::kBF16) { tensor::ForceBf16Emulation(m.emulated); }
  ~ScopedBf16() { tensor::ForceBf16Emulation(false); }

 private:
  tensor::ScopedPrecision p_;
};

struct LinearRun {
  std::vector<float> y, dx, dw, db;
};

TEST(Bf16Layers, LinearForwardAndBackwardWithinTheBound) {
  const int64_t n = 24, ic = 40, oc = 36;
  ParameterStore ps;
  Linear lin(ps, "lin", ic, oc, true, Init::Normal(0.5f), Init::Normal(0.5f));
  ps.Finalize(3);
  const std::vector<float> xv = RandomVector(n * ic, 1.0f, 11), r = RandomVector(n * oc, 1.0f, 12);
  auto run = [&] {
    ps.ZeroGrad();
    Tape tape;
    Variable x = Leaf(tape, {n, ic}, xv);
    Variable y = lin.Forward(tape, x);
    LinearRun out{y.value().ToVector(), {}, {}, {}};
    tape.Backward(ProbeLoss(tape, y, r), 1.0f);
    out.dx = x.grad().ToVector();
    out.dw = ps.grad(lin.weight_index()).ToVector();
    out.db = ps.grad(lin.bias_index()).ToVector();
    return out;
  };
  const LinearRun fp32 = run();
  const std::vector<float> w = ps.value(lin.weight_index()).ToVector(), b = ps.value(lin.bias_index()).ToVector();
  // Sums of |terms|: y = x W^T + b (K = ic), dx = r W (K = oc), dW = r^T x (K = n).
  std::vector<double> sy(n * oc), sdx(n * ic), sdw(oc * ic);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < oc; ++o) {
      double s = std::fabs(b[o]);
      for (int64_t k = 0; k < ic; ++k) {
        s += std::fabs(xv[i * ic + k] * w[o * ic + k]);
        sdx[i * ic + k] += std::fabs(r[i * oc + o] * w[o * ic + k]);
        sdw[o * ic + k] += std::fabs(r[i * oc + o] * xv[i * ic + k]);
      }
      sy[i * oc + o] = s;
    }
  for (const Mode& m : Bf16Modes()) {
    ScopedBf16 bf16(m);
    const LinearRun got = run();
    ExpectWithin(got.y, fp32.y, sy, ic, std::string(m.name) + " y");
    ExpectWithin(got.dx, fp32.dx, sdx, oc, std::string(m.name) + " dx");
    ExpectWithin(got.dw, fp32.dw, sdw, n, std::string(m.name) + " dW");
    EXPECT_EQ(got.db, fp32.db) << m.name << ": the bias gradient is a column sum, no product";
  }
}

TEST(Bf16Layers, Conv2dForwardAndBackwardWithinTheBound) {
  const int64_t N = 4, IC = 3, H = 6, W = 5, OC = 8, K = 3, P = 1;
  ParameterStore ps;
  Conv2d conv(ps, "conv", IC, OC, K, 1, P);
  ps.Finalize(5);
  const std::vector<float> xv = RandomVector(N * IC * H * W, 1.0f, 21), r = RandomVector(N * OC * H * W, 1.0f, 22);
  auto run = [&] {
    ps.ZeroGrad();
    Tape tape;
    Variable x = Leaf(tape, {N, IC, H, W}, xv);
    Variable y = conv.Forward(tape, x);
    LinearRun out{y.value().ToVector(), {}, {}, {}};
    tape.Backward(ProbeLoss(tape, y, r), 1.0f);
    out.dx = x.grad().ToVector();
    out.dw = ps.grad(0).ToVector();
    out.db = ps.grad(1).ToVector();
    return out;
  };
  const LinearRun fp32 = run();
  const std::vector<float> w = ps.value(0).ToVector(), b = ps.value(1).ToVector();
  std::vector<double> sy(N * OC * H * W), sdx(N * IC * H * W), sdw(OC * IC * K * K), sdb(OC);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const int64_t out = ((n * OC + o) * H + y) * W + x;
          sy[out] += std::fabs(b[o]);
          sdb[o] += std::fabs(r[out]);
          for (int64_t i = 0; i < IC; ++i)
            for (int64_t ky = 0; ky < K; ++ky)
              for (int64_t kx = 0; kx < K; ++kx) {
                const int64_t yy = y + ky - P, xx = x + kx - P;
                if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                const int64_t in = ((n * IC + i) * H + yy) * W + xx, wi = ((o * IC + i) * K + ky) * K + kx;
                sy[out] += std::fabs(xv[in] * w[wi]);
                sdx[in] += std::fabs(r[out] * w[wi]);
                sdw[wi] += std::fabs(r[out] * xv[in]);
              }
        }
  for (const Mode& m : Bf16Modes()) {
    for (bool det : {false, true}) {
      tensor::ScopedDeterministic d(det);
      ScopedBf16 bf16(m);
      const LinearRun got = run();
      const std::string what = std::string(m.name) + (det ? " deterministic" : "");
      ExpectWithin(got.y, fp32.y, sy, IC * K * K, what + " y");
      ExpectWithin(got.dx, fp32.dx, sdx, OC * K * K, what + " dx");
      ExpectWithin(got.dw, fp32.dw, sdw, N * H * W, what + " dW");
      // oneDNN sums the bias gradient from the bf16 output gradient it was given: one rounding
      // per term, inside the two-rounding bound.
      ExpectWithin(got.db, fp32.db, sdb, N * H * W, what + " db");
    }
  }
}

// Layers without a GEMM or convolution compute in fp32 whatever the precision: the same bits.
TEST(Bf16Layers, LayersWithoutProductsAreUnchanged) {
  const int64_t n = 16, c = 24;
  ParameterStore ps;
  LayerNorm ln(ps, "ln", c);
  ps.Finalize(9);
  const std::vector<float> xv = RandomVector(n * c, 2.0f, 31), r = RandomVector(n * c, 1.0f, 32);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>((i * 7) % c);
  auto run = [&] {
    ps.ZeroGrad();
    Tape tape;
    Variable x = Leaf(tape, {n, c}, xv);
    Variable h = GeluForward(tape, ln.Forward(tape, x));
    tensor::Tensor t = tensor::Tensor::FromVectorI32({n}, targets);
    Variable loss = SoftmaxCrossEntropyForward(tape, h, t);
    std::vector<float> out = h.value().ToVector();
    out.push_back(loss.value().ToVector()[0]);
    tape.Backward(loss, 1.0f);
    for (float g : x.grad().ToVector()) out.push_back(g);
    for (float g : ps.grads_tensor().ToVector()) out.push_back(g);
    return out;
  };
  const std::vector<float> fp32 = run();
  for (const Mode& m : Bf16Modes()) {
    ScopedBf16 bf16(m);
    EXPECT_EQ(run(), fp32) << m.name;
  }
}

// The whole GPT: every GEMM of forward and backward in bf16. Rounding errors of successive
// GEMMs compound, so the check is normwise: each GEMM adds a relative error of about u = 2^-8
// (random signs: the per-element bound above is the worst case), a gradient passes through
// about 3 GEMMs per layer each way, and layer norm renormalises in between; with 2 layers
// the loss must agree to 2^-8 relative and the gradient to 2^-6 in norm (measured: 4e-6 and
// 0.003, about u).
TEST(Bf16Layers, GptLossAndGradientsCloseToFp32) {
  GptConfig c;
  c.vocab = 64;
  c.context = 16;
  c.layers = 2;
  c.heads = 2;
  c.width = 32;
  Gpt gpt(c);
  const int64_t B = 4, T = 16;
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (int64_t i = 0; i < B * T; ++i) {
    tokens[i] = static_cast<int32_t>((i * 13 + 5) % c.vocab);
    targets[i] = static_cast<int32_t>((i * 29 + 3) % c.vocab);
  }
  auto run = [&](double* loss) {
    gpt.params().ZeroGrad();
    Tape tape;
    ModelInput in;
    in.tokens = tokens.data();
    in.targets = targets.data();
    in.batch = B;
    in.seq = T;
    Variable l = gpt.Loss(tape, in);
    *loss = l.value().ToVector()[0];
    tape.Backward(l, 1.0f);
    return gpt.params().grads_tensor().ToVector();
  };
  double loss32 = 0;
  const std::vector<float> g32 = run(&loss32);
  for (const Mode& m : Bf16Modes()) {
    ScopedBf16 bf16(m);
    double loss16 = 0;
    const std::vector<float> g16 = run(&loss16);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < g32.size(); ++i) {
      diff += (static_cast<double>(g16[i]) - g32[i]) * (static_cast<double>(g16[i]) - g32[i]);
      norm += static_cast<double>(g32[i]) * g32[i];
    }
    EXPECT_LE(std::fabs(loss16 - loss32), std::ldexp(1.0, -8) * loss32) << m.name;
    EXPECT_NE(loss16, loss32) << m.name << ": bf16 was not used";
    EXPECT_LE(std::sqrt(diff / norm), std::ldexp(1.0, -6)) << m.name;
    std::printf("%s: loss %.6f vs %.6f, gradient relative error %.4f\n", m.name, loss16, loss32,
                std::sqrt(diff / norm));
  }
}

}  // namespace
}  // namespace lockstep::nn
