// Every elementwise / dense layer against its double reference: forward values, and the
// analytic gradients of inputs and parameters against central finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "lockstep/nn/activation.h"
#include "lockstep/nn/cross_entropy.h"
#include "lockstep/nn/embedding.h"
#include "lockstep/nn/layer_norm.h"
#include "lockstep/nn/linear.h"
#include "lockstep/nn/shape_ops.h"
#include "nn/grad_check.h"
#include "nn/reference.h"
#include "tensor/tensor_test_util.h"

namespace lockstep::nn {
namespace {

using autograd::Tape;
using autograd::Variable;
using testing::Checked;
using testing::ExpectGradientsMatch;
using testing::Leaf;
using testing::ProbeLoss;
using testing::RandomVector;
using testing::RefProbe;
using testing::ToDouble;

// Overwrites every parameter with U(-scale, scale) (offset by `shift`).
void Randomize(ParameterStore& ps, float scale, uint64_t seed, float shift = 0.0f) {
  std::vector<float> v = RandomVector(ps.numel(), scale, seed);
  for (int64_t i = 0; i < ps.numel(); ++i) ps.flat_params()[i] = v[i] + shift;
}

TEST(Linear, TwoConsumersOfOneInputWithAndWithoutBias) {
  // y = A(x) + B(x), A with bias, B without: x's gradient takes the "fresh" (overwrite)
  // path in one backward and the accumulate path in the other.
  ParameterStore ps;
  Linear a(ps, "a", 5, 4, true, Init::Zeros(), Init::Zeros());
  Linear b(ps, "b", 5, 4, false, Init::Zeros(), Init::Zeros());
  ps.Finalize(0);
  Randomize(ps, 0.8f, 11);
  Tape tape;
  std::vector<float> xv = RandomVector(2 * 3 * 5, 1.0f, 12), r = RandomVector(24, 1.0f, 13);
  Variable x = Leaf(tape, {2, 3, 5}, xv);
  Variable y = AddForward(tape, a.Forward(tape, x), b.Forward(tape, x));
  EXPECT_EQ(y.shape(), tensor::Shape({2, 3, 4}));
  ref::Vec xd = ToDouble(xv);
  ref::Params p = ref::FromStore(ps);
  auto f = [&] {
    return RefProbe(
        ref::AddVec(ref::Linear(xd, p["a.weight"], p["a.bias"], 6, 5, 4), ref::Linear(xd, p["b.weight"], {}, 6, 5, 4)),
        r);
  };
  Variable loss = ProbeLoss(tape, y, r);
  EXPECT_NEAR(loss.data()[0], f(), 1e-5);
  tape.Backward(loss, 1.0f);
  ExpectGradientsMatch({{"x", &xd, x.grad().ToVector()},
                        {"a.weight", &p["a.weight"], ps.grad(0).ToVector()},
                        {"a.bias", &p["a.bias"], ps.grad(1).ToVector()},
                        {"b.weight", &p["b.weight"], ps.grad(2).ToVector()}},
                       f);
}

TEST(Embedding, RepeatedIdsAccumulate) {
  ParameterStore ps;
  Embedding e(ps, "wte", 7, 6, Init::Normal(1.0f));
  ps.Finalize(3);
  tensor::Tensor ids = tensor::Tensor::FromVectorI32({2, 4}, {1, 3, 3, 0, 6, 1, 1, 2});
  Tape tape;
  Variable y = e.Forward(tape, ids);
  EXPECT_EQ(y.shape(), tensor::Shape({2, 4, 6}));
  std::vector<float> r = RandomVector(48, 1.0f, 5);
  ref::Params p = ref::FromStore(ps);
  const std::vector<int32_t> idv = ids.ToVectorI32();
  auto f = [&] { return RefProbe(ref::Embedding(idv, p["wte.weight"], 6), r); };
  EXPECT_LT(testing::MaxRelDiff(y.value().ToVector(), ref::Embedding(idv, p["wte.weight"], 6)), 1e-7);
  tape.Backward(ProbeLoss(tape, y, r), 1.0f);
  std::vector<float> g = ps.grad(0).ToVector();
  // Rows 4 and 5 are never looked up: exactly zero.
  for (int j = 0; j < 12; ++j) EXPECT_EQ(g[4 * 6 + j], 0.0f);
  ExpectGradientsMatch({{"wte.weight", &p["wte.weight"], g}}, f);
}

TEST(LayerNorm, MatchesReferenceAndGradients) {
  ParameterStore ps;
  LayerNorm ln(ps, "ln", 8);
  ps.Finalize(0);
  EXPECT_EQ(ps.value(0).ToVector(), std::vector<float>(8, 1.0f));  // weight 1
  EXPECT_EQ(ps.value(1).ToVector(), std::vector<float>(8, 0.0f));  // bias 0
  Randomize(ps, 0.5f, 21, 0.5f);
  std::vector<float> xv = RandomVector(6 * 8, 2.0f, 22), r = RandomVector(48, 1.0f, 23);
  for (int j = 0; j < 8; ++j) xv[j] += 3.0f;  // a row with a large mean
  Tape tape;
  Variable x = Leaf(tape, {2, 3, 8}, xv);
  Variable y = ln.Forward(tape, x);
  ref::Vec xd = ToDouble(xv);
  ref::Params p = ref::FromStore(ps);
  auto fwd = [&] { return ref::LayerNorm(xd, p["ln.weight"], p["ln.bias"], 6, 8); };
  EXPECT_LT(testing::MaxRelDiff(y.value().ToVector(), fwd()), 1e-5);
  tape.Backward(ProbeLoss(tape, y, r), 1.0f);
  ExpectGradientsMatch({{"x", &xd, x.grad().ToVector()},
                        {"ln.weight", &p["ln.weight"], ps.grad(0).ToVector()},
                        {"ln.bias", &p["ln.bias"], ps.grad(1).ToVector()}},
                       [&] { return RefProbe(fwd(), r); });
}

TEST(Activations, GeluTanhAndRelu) {
  // 37 elements: not a multiple of the vector width, so the tail paths run too.
  std::vector<float> xv = RandomVector(37, 4.0f, 31), r = RandomVector(37, 1.0f, 32);
  for (float& v : xv) {
    if (std::fabs(v) < 1e-3f) v = 0.5f;  // keep ReLU away from its kink
  }
  Tape tape;
  Variable xg = Leaf(tape, {37}, xv);
  Variable xr = Leaf(tape, {37}, xv);
  Variable g = GeluForward(tape, xg);
  Variable rl = ReluForward(tape, xr);
  ref::Vec xgd = ToDouble(xv), xrd = ToDouble(xv);
  EXPECT_LT(testing::MaxRelDiff(g.value().ToVector(), ref::Gelu(xgd)), 1e-5);
  EXPECT_LT(testing::MaxRelDiff(rl.value().ToVector(), ref::Relu(xrd)), 1e-7);
  // Both through one loss: probe(gelu) + probe(relu) via a residual add.
  tape.Backward(ProbeLoss(tape, AddForward(tape, g, rl), r), 1.0f);
  ExpectGradientsMatch({{"gelu.x", &xgd, xg.grad().ToVector()}, {"relu.x", &xrd, xr.grad().ToVector()}},
                       [&] { return RefProbe(ref::AddVec(ref::Gelu(xgd), ref::Relu(xrd)), r); });
}

// The MLP's fused up-projection + GELU, with and without a bias, 13 outputs (a vector tail on
// every row): values and every gradient against the double reference; without a recording tape
// the same values, bit for bit.
TEST(Linear, FusedGeluWithAndWithoutBias) {
  ParameterStore ps;
  Linear a(ps, "a", 5, 13, true, Init::Zeros(), Init::Zeros());
  Linear b(ps, "b", 5, 13, false, Init::Zeros(), Init::Zeros());
  ps.Finalize(0);
  Randomize(ps, 0.8f, 35);
  std::vector<float> xv = RandomVector(2 * 3 * 5, 1.5f, 36), r = RandomVector(6 * 13, 1.0f, 37);
  Tape tape;
  Variable x = Leaf(tape, {2, 3, 5}, xv);
  Variable ya = a.ForwardGelu(tape, x);
  Variable yb = b.ForwardGelu(tape, x);
  EXPECT_EQ(ya.shape(), tensor::Shape({2, 3, 13}));
  ref::Vec xd = ToDouble(xv);
  ref::Params p = ref::FromStore(ps);
  auto ra = [&] { return ref::Gelu(ref::Linear(xd, p["a.weight"], p["a.bias"], 6, 5, 13)); };
  auto rb = [&] { return ref::Gelu(ref::Linear(xd, p["b.weight"], {}, 6, 5, 13)); };
  EXPECT_LT(testing::MaxRelDiff(ya.value().ToVector(), ra()), 1e-5);
  EXPECT_LT(testing::MaxRelDiff(yb.value().ToVector(), rb()), 1e-5);
  tape.Backward(ProbeLoss(tape, AddForward(tape, ya, yb), r), 1.0f);
  ExpectGradientsMatch({{"x", &xd, x.grad().ToVector()},
                        {"a.weight", &p["a.weight"], ps.grad(0).ToVector()},
                        {"a.bias", &p["a.bias"], ps.grad(1).ToVector()},
                        {"b.weight", &p["b.weight"], ps.grad(2).ToVector()}},
                       [&] { return RefProbe(ref::AddVec(ra(), rb()), r); });

  Tape no_grad;
  no_grad.set_grad_enabled(false);
  Variable x2 = Leaf(no_grad, {2, 3, 5}, xv);
  EXPECT_TRUE(tensor::testing::BitEqual(a.ForwardGelu(no_grad, x2).value().ToVector(), ya.value().ToVector()));
  EXPECT_TRUE(tensor::testing::BitEqual(x2.value().ToVector(), xv));
}

// The output projection with the residual add fused: y = x + A(x) (the input is also the
// residual: the gradient cannot be handed over and is added), then z = y + B(x) (y's gradient is
// handed to y). Values and gradients against the double reference.
TEST(Linear, FusedResidualWithAndWithoutBias) {
  ParameterStore ps;
  Linear a(ps, "a", 5, 5, true, Init::Zeros(), Init::Zeros());
  Linear b(ps, "b", 5, 5, false, Init::Zeros(), Init::Zeros());
  ps.Finalize(0);
  Randomize(ps, 0.8f, 38);
  std::vector<float> xv = RandomVector(2 * 3 * 5, 1.0f, 39), r = RandomVector(30, 1.0f, 40);
  Tape tape;
  Variable x = Leaf(tape, {2, 3, 5}, xv);
  Variable y = a.ForwardResidual(tape, x, x);
  Variable z = b.ForwardResidual(tape, x, y);
  EXPECT_EQ(z.shape(), tensor::Shape({2, 3, 5}));
  ref::Vec xd = ToDouble(xv);
  ref::Params p = ref::FromStore(ps);
  auto f = [&] {
    return ref::AddVec(xd, ref::AddVec(ref::Linear(xd, p["a.weight"], p["a.bias"], 6, 5, 5),
                                       ref::Linear(xd, p["b.weight"], {}, 6, 5, 5)));
  };
  EXPECT_LT(testing::MaxRelDiff(z.value().ToVector(), f()), 1e-5);
  tape.Backward(ProbeLoss(tape, z, r), 1.0f);
  ExpectGradientsMatch({{"x", &xd, x.grad().ToVector()},
                        {"a.weight", &p["a.weight"], ps.grad(0).ToVector()},
                        {"a.bias", &p["a.bias"], ps.grad(1).ToVector()},
                        {"b.weight", &p["b.weight"], ps.grad(2).ToVector()}},
                       [&] { return RefProbe(f(), r); });
}

TEST(ShapeOps, AddSameInputTwiceAndReshape) {
  // y = reshape(x + x) + x: the residual path hands gradients over; x collects 3x.
  std::vector<float> xv = RandomVector(12, 1.0f, 41), r = RandomVector(12, 1.0f, 42);
  Tape tape;
  Variable x = Leaf(tape, {3, 4}, xv);
  Variable sum = AddForward(tape, x, x);
  Variable s = ReshapeForward(tape, sum, {4, 3});
  EXPECT_EQ(s.shape(), tensor::Shape({4, 3}));
  EXPECT_EQ(s.value().storage(), sum.value().storage());  // a view, no copy
  Variable y = AddForward(tape, ReshapeForward(tape, s, {3, 4}), x);
  tape.Backward(ProbeLoss(tape, y, r), 1.0f);
  std::vector<float> g = x.grad().ToVector();
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(g[i], 3.0f * r[i]) << i;
}

TEST(CrossEntropy, MeanOverCountedRowsWithIgnoreAndScale) {
  std::vector<float> lv = RandomVector(5 * 7, 3.0f, 51);
  const std::vector<int32_t> tv = {2, -1, 6, 0, 3};  // row 1 ignored
  tensor::Tensor targets = tensor::Tensor::FromVectorI32({5}, tv);
  Tape tape;
  Variable logits = Leaf(tape, {5, 7}, lv);
  Variable loss = SoftmaxCrossEntropyForward(tape, logits, targets);
  ref::Vec ld = ToDouble(lv);
  auto f = [&] { return ref::CrossEntropy(ld, tv, 5, 7); };
  EXPECT_NEAR(loss.data()[0], f(), 1e-6);
  // grad_scale 0.25 must scale every gradient.
  tape.Backward(loss, 0.25f);
  std::vector<float> g = logits.grad().ToVector();
  for (int j = 0; j < 7; ++j) EXPECT_EQ(g[7 + j], 0.0f);
  for (float& v : g) v *= 4.0f;
  ExpectGradientsMatch({{"logits", &ld, g}}, f);

  // Evaluation statistics: sum of losses, count and argmax hits.
  CrossEntropyStats s = SoftmaxCrossEntropyStats(lv.data(), tv.data(), 5, 7);
  EXPECT_EQ(s.count, 4);
  EXPECT_NEAR(s.loss_sum / s.count, f(), 1e-5);
  int64_t correct = 0;
  for (int i = 0; i < 5; ++i) {
    if (tv[i] < 0) continue;
    int best = 0;
    for (int j = 1; j < 7; ++j) best = lv[i * 7 + j] > lv[i * 7 + best] ? j : best;
    correct += best == tv[i];
  }
  EXPECT_EQ(s.correct, correct);
}

}  // namespace
}  // namespace lockstep::nn
