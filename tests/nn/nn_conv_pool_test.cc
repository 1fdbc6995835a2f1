// Conv2d (oneDNN plans) and 2x2 max pooling against double references, gradients by
// finite differences; also the first-layer case where the input needs no gradient.
#include <gtest/gtest.h>

#include <cmath>

#include "lockstep/nn/activation.h"
#include "lockstep/nn/conv2d.h"
#include "lockstep/nn/max_pool.h"
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

TEST(Conv2d, GradientsOfInputWeightsAndBias) {
  const int64_t N = 2, IC = 3, H = 6, W = 5, OC = 4, K = 3;
  ParameterStore ps;
  Conv2d conv(ps, "conv", IC, OC, K, 1, 1);
  ps.Finalize(7);
  // PyTorch default init bound 1/sqrt(fan_in) = 1/sqrt(27).
  const float bound = 1.0f / std::sqrt(27.0f);
  for (int64_t i = 0; i < ps.numel(); ++i) {
    EXPECT_LE(std::fabs(ps.flat_params()[i]), bound);
  }
  EXPECT_TRUE(ps.info(0).decay);
  EXPECT_FALSE(ps.info(1).decay);
  std::vector<float> xv = RandomVector(N * IC * H * W, 1.0f, 71), r = RandomVector(N * OC * H * W, 1.0f, 72);
  Tape tape;
  Variable x = Leaf(tape, {N, IC, H, W}, xv);
  // x feeds the convolution twice (two plans would be the same; this exercises the
  // accumulate path of the data gradient, which oneDNN overwrites).
  Variable y = conv.Forward(tape, x);
  Variable y2 = conv.Forward(tape, x);
  ref::Vec xd = ToDouble(xv);
  ref::Params p = ref::FromStore(ps);
  auto fwd = [&] { return ref::Conv2d(xd, p["conv.weight"], p["conv.bias"], N, IC, H, W, OC, K, 1); };
  EXPECT_EQ(y.shape(), tensor::Shape({N, OC, H, W}));
  EXPECT_LT(testing::MaxRelDiff(y.value().ToVector(), fwd()), 1e-5);
  std::vector<float> r2 = RandomVector(N * OC * H * W, 1.0f, 73);
  Variable l1 = ProbeLoss(tape, y, r);
  Variable l2 = ProbeLoss(tape, y2, r2);
  // loss = l1 + l2 through a [1] + [1] add.
  Variable both = tape.NewActivation({1}, true);
  both.data()[0] = l1.data()[0] + l2.data()[0];
  tape.Record({l1, l2}, [both, l1, l2] {
    l1.GradAccumulate()[0] += both.grad_data()[0];
    l2.GradAccumulate()[0] += both.grad_data()[0];
  });
  tape.Backward(both, 1.0f);
  auto f = [&] {
    ref::Vec o = fwd();
    return RefProbe(o, r) + RefProbe(o, r2);
  };
  ExpectGradientsMatch({{"x", &xd, x.grad().ToVector()},
                        {"conv.weight", &p["conv.weight"], ps.grad(0).ToVector()},
                        {"conv.bias", &p["conv.bias"], ps.grad(1).ToVector()}},
                       f);
}

TEST(Conv2d, ConstantInputGetsNoGradient) {
  ParameterStore ps;
  Conv2d conv(ps, "c", 1, 2, 3, 1, 1);
  ps.Finalize(1);
  Tape tape;
  Variable img = Variable::Constant(tensor::Tensor::FromVector({1, 1, 4, 4}, RandomVector(16, 1.0f, 3)));
  Variable y = conv.Forward(tape, img);
  std::vector<float> r = RandomVector(32, 1.0f, 4);
  tape.Backward(ProbeLoss(tape, y, r), 1.0f);
  EXPECT_FALSE(img.has_grad());
  ref::Vec xd = ToDouble(img.value().ToVector());
  ref::Params p = ref::FromStore(ps);
  ExpectGradientsMatch(
      {{"c.weight", &p["c.weight"], ps.grad(0).ToVector()}, {"c.bias", &p["c.bias"], ps.grad(1).ToVector()}},
      [&] { return RefProbe(ref::Conv2d(xd, p["c.weight"], p["c.bias"], 1, 1, 4, 4, 2, 3, 1), r); });
}

TEST(MaxPool2x2, ValuesAndGradients) {
  const int64_t N = 2, C = 3, H = 6, W = 4;
  std::vector<float> xv = RandomVector(N * C * H * W, 1.0f, 81), r = RandomVector(N * C * 3 * 2, 1.0f, 82);
  Tape tape;
  Variable x = Leaf(tape, {N, C, H, W}, xv);
  Variable y = MaxPool2x2Forward(tape, x);
  EXPECT_EQ(y.shape(), tensor::Shape({N, C, 3, 2}));
  ref::Vec xd = ToDouble(xv);
  EXPECT_LT(testing::MaxRelDiff(y.value().ToVector(), ref::MaxPool2x2(xd, N, C, H, W)), 1e-7);
  tape.Backward(ProbeLoss(tape, y, r), 1.0f);
  ExpectGradientsMatch({{"x", &xd, x.grad().ToVector()}}, [&] { return RefProbe(ref::MaxPool2x2(xd, N, C, H, W), r); },
                       {.coords = 200});
}

// The fused layer the cnn uses must equal ReLU then pooling bit for bit, including windows
// that are all negative (no gradient), ties, and exact zeros.
TEST(ReluMaxPool2x2, BitIdenticalToReluThenPool) {
  const int64_t N = 2, C = 3, H = 6, W = 10;
  std::vector<float> xv = RandomVector(N * C * H * W, 1.0f, 91), r = RandomVector(N * C * 3 * 5, 1.0f, 92);
  for (size_t i = 0; i < xv.size(); i += 7) xv[i] = 0.0f;
  for (size_t i = 3; i + 1 < xv.size(); i += 11) xv[i + 1] = xv[i];
  auto run = [&](bool fused, std::vector<float>* dx) {
    Tape tape;
    Variable x = Leaf(tape, {N, C, H, W}, xv);
    Variable y = fused ? ReluMaxPool2x2Forward(tape, x) : MaxPool2x2Forward(tape, ReluForward(tape, x));
    tape.Backward(ProbeLoss(tape, y, r), 1.0f);
    *dx = x.grad().ToVector();
    return y.value().ToVector();
  };
  std::vector<float> dx_fused, dx_plain;
  std::vector<float> y_fused = run(true, &dx_fused), y_plain = run(false, &dx_plain);
  EXPECT_EQ(y_fused, y_plain);
  EXPECT_EQ(dx_fused, dx_plain);
  int zero_grads = 0;
  for (float g : dx_fused) zero_grads += g == 0.0f;
  EXPECT_GT(zero_grads, 0);  // the test covers inputs that get no gradient
}

}  // namespace
}  // namespace lockstep::nn
