// Causal self-attention: the packed-qkv op against the double reference (values, dqkv by
// finite differences), a check that the mask really is causal, and the full module
// (qkv Linear, attention, proj Linear) with parameter gradients.
#include <gtest/gtest.h>

#include "lockstep/nn/attention.h"
#include "nn/grad_check.h"
#include "nn/reference.h"

namespace lockstep::nn {
namespace {

using autograd::Tape;
using autograd::Variable;
using testing::ExpectGradientsMatch;
using testing::Leaf;
using testing::ProbeLoss;
using testing::RandomVector;
using testing::RefProbe;
using testing::ToDouble;

TEST(Attention, PackedQkvMatchesReferenceAndGradients) {
  // T = 37 crosses the kernel's 32-row blocks; hs = 4.
  const int64_t B = 2, T = 37, C = 8, H = 2;
  std::vector<float> qv = RandomVector(B * T * 3 * C, 1.5f, 61), r = RandomVector(B * T * C, 1.0f, 62);
  Tape tape;
  Variable qkv = Leaf(tape, {B, T, 3 * C}, qv);
  Variable y = AttentionForward(tape, qkv, H);
  EXPECT_EQ(y.shape(), tensor::Shape({B, T, C}));
  ref::Vec qd = ToDouble(qv);
  EXPECT_LT(testing::MaxRelDiff(y.value().ToVector(), ref::Attention(qd, B, T, C, H)), 1e-5);
  tape.Backward(ProbeLoss(tape, y, r), 1.0f);
  ExpectGradientsMatch({{"qkv", &qd, qkv.grad().ToVector()}},
                       [&] { return RefProbe(ref::Attention(qd, B, T, C, H), r); }, {.coords = 120});
}

TEST(Attention, IsCausal) {
  // Changing the last position's q, k, v must not change any earlier output.
  const int64_t B = 1, T = 5, C = 4, H = 1;
  std::vector<float> qv = RandomVector(B * T * 3 * C, 1.0f, 63);
  Tape tape;
  Tape::NoGradGuard ng(tape);
  std::vector<float> y0 = AttentionForward(tape, Leaf(tape, {B, T, 3 * C}, qv), H).value().ToVector();
  for (int j = 0; j < 3 * C; ++j) qv[(T - 1) * 3 * C + j] += 1.0f;
  std::vector<float> y1 = AttentionForward(tape, Leaf(tape, {B, T, 3 * C}, qv), H).value().ToVector();
  for (int64_t i = 0; i < (T - 1) * C; ++i) EXPECT_EQ(y0[i], y1[i]) << i;
  EXPECT_NE(y0[(T - 1) * C], y1[(T - 1) * C]);
}

TEST(CausalSelfAttention, ModuleGradients) {
  const int64_t B = 2, T = 6, C = 8, H = 2;
  ParameterStore ps;
  CausalSelfAttention attn(ps, "blocks.0", C, H, 0.02f, 0.01f);
  ps.Finalize(5);
  EXPECT_EQ(ps.Find("blocks.0.qkv.weight"), 0);
  EXPECT_EQ(ps.Find("blocks.0.qkv.bias"), 1);
  EXPECT_EQ(ps.Find("blocks.0.proj.weight"), 2);
  EXPECT_EQ(ps.Find("blocks.0.proj.bias"), 3);
  // Large random weights so the softmax is far from uniform.
  std::vector<float> pv = RandomVector(ps.numel(), 0.6f, 64);
  std::copy(pv.begin(), pv.end(), ps.flat_params());
  std::vector<float> xv = RandomVector(B * T * C, 1.0f, 65), r = RandomVector(B * T * C, 1.0f, 66);
  Tape tape;
  Variable x = Leaf(tape, {B, T, C}, xv);
  Variable y = attn.Forward(tape, x);
  ref::Vec xd = ToDouble(xv);
  ref::Params p = ref::FromStore(ps);
  auto fwd = [&] {
    ref::Vec qkv = ref::Linear(xd, p["blocks.0.qkv.weight"], p["blocks.0.qkv.bias"], B * T, C, 3 * C);
    return ref::Linear(ref::Attention(qkv, B, T, C, H), p["blocks.0.proj.weight"], p["blocks.0.proj.bias"], B * T, C,
                       C);
  };
  EXPECT_LT(testing::MaxRelDiff(y.value().ToVector(), fwd()), 1e-5);
  tape.Backward(ProbeLoss(tape, y, r), 1.0f);
  std::vector<testing::Checked> checked = {{"x", &xd, x.grad().ToVector()}};
  for (int i = 0; i < ps.size(); ++i) {
    checked.push_back({ps.info(i).name, &p[ps.info(i).name], ps.grad(i).ToVector()});
  }
  ExpectGradientsMatch(checked, [&] { return RefProbe(fwd(), r); });
}

}  // namespace
}  // namespace lockstep::nn
