// Cnn: the peer's architecture (50,186 parameters), PyTorch-default init from the counter
// RNG, whole-model gradients against finite differences of the double reference on two
// images, the gradient-ready hook, evaluation and FLOP accounting.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "lockstep/nn/cnn.h"
#include "lockstep/tensor/threads.h"
#include "nn/grad_check.h"
#include "nn/reference.h"

namespace lockstep::nn {
namespace {

using autograd::Tape;
using autograd::Variable;
using testing::RandomVector;

struct Images {
  std::vector<float> pixels;
  std::vector<int32_t> labels;
  ModelInput input() const {
    ModelInput in;
    in.features = pixels.data();
    in.labels = labels.data();
    in.batch = static_cast<int64_t>(labels.size());
    return in;
  }
};

Images RandomImages(int64_t n, uint64_t seed) {
  Images im;
  // Pixels in [0, 1) like the loader's x / 255.
  im.pixels = RandomVector(n * 28 * 28, 0.5f, seed);
  for (float& p : im.pixels) p += 0.5f;
  for (int64_t i = 0; i < n; ++i) im.labels.push_back(static_cast<int32_t>((seed + 3 * i) % 10));
  return im;
}

TEST(Cnn, ParameterCountNamesAndInit) {
  Cnn cnn{CnnConfig{}};
  const ParameterStore& ps = cnn.params();
  EXPECT_EQ(ps.numel(), 50186);
  EXPECT_EQ(ps.numel(), kCnnParamCount);
  const std::vector<std::pair<std::string, tensor::Shape>> want = {
      {"conv1.weight", {32, 1, 3, 3}}, {"conv1.bias", {32}}, {"conv2.weight", {64, 32, 3, 3}}, {"conv2.bias", {64}},
      {"fc.weight", {10, 3136}},       {"fc.bias", {10}}};
  ASSERT_EQ(ps.size(), 6);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(ps.info(i).name, want[i].first);
    EXPECT_EQ(ps.info(i).shape, want[i].second);
    EXPECT_EQ(ps.info(i).decay, i % 2 == 0);
  }
  // U(+-1/sqrt(fan_in)), weights and biases alike: fan_in 9, 288, 3136.
  const double bounds[] = {
      1 / 3.0, 1 / 3.0, 1 / std::sqrt(288.0), 1 / std::sqrt(288.0), 1 / std::sqrt(3136.0), 1 / std::sqrt(3136.0)};
  for (int i = 0; i < 6; ++i) {
    double mx = 0.0, sum_sq = 0.0;
    for (float v : ps.value(i).ToVector()) {
      mx = std::max(mx, static_cast<double>(std::fabs(v)));
      sum_sq += static_cast<double>(v) * v;
    }
    EXPECT_LE(mx, bounds[i]) << ps.info(i).name;
    if (ps.info(i).numel > 1000) {
      // Uniform(-b, b) has variance b^2/3.
      EXPECT_NEAR(sum_sq / ps.info(i).numel, bounds[i] * bounds[i] / 3, 0.05 * bounds[i] * bounds[i]);
      EXPECT_GT(mx, 0.95 * bounds[i]);
    }
  }
  Cnn again{CnnConfig{}};
  EXPECT_EQ(std::memcmp(ps.flat_params(), again.params().flat_params(), 50186 * sizeof(float)), 0);
  Cnn other{CnnConfig{.init_seed = 9}};
  EXPECT_NE(std::memcmp(ps.flat_params(), other.params().flat_params(), 50186 * sizeof(float)), 0);
}

TEST(Cnn, WholeModelGradientsMatchFiniteDifferences) {
  tensor::ScopedComputeThreads one(1);
  Cnn cnn{CnnConfig{.init_seed = 4}};
  Images im = RandomImages(2, 7);
  Tape tape;
  Variable loss = cnn.Loss(tape, im.input());
  ref::Params p = ref::FromStore(cnn.params());
  ref::Vec pix = testing::ToDouble(im.pixels);
  const double ref_loss = ref::CnnLoss(p, pix, im.labels, 2);
  EXPECT_NEAR(loss.data()[0], ref_loss, 1e-5 * std::fabs(ref_loss));
  tape.Backward(loss, 1.0f);
  ref::CnnStaged staged(&p, &pix, &im.labels, 2);
  EXPECT_NEAR(staged.Run(), ref_loss, 1e-12);
  std::vector<testing::Checked> checked;
  for (const ParamInfo& info : cnn.params()) {
    checked.push_back({info.name, &p[info.name], cnn.params().grad(cnn.params().Find(info.name)).ToVector()});
  }
  // Each finite difference recomputes only what the perturbed coordinate changes (one
  // output channel of a convolution), which keeps 50 coordinates per tensor cheap.
  // Tensors in registration order: conv1.weight [32,1,3,3], conv1.bias, conv2.weight
  // [64,32,3,3], conv2.bias, fc.weight, fc.bias.
  auto f = [&](size_t t, int64_t k) {
    switch (t) {
      case 0:
        return staged.LossAfterConv1Channel(k / 9);
      case 1:
        return staged.LossAfterConv1Channel(k);
      case 2:
        return staged.LossAfterConv2Channel(k / 288);
      case 3:
        return staged.LossAfterConv2Channel(k);
      default:
        return staged.LossAfterFc();
    }
  };
  // The shortcuts agree with the full reference on perturbed parameters.
  p["conv1.weight"][40] += 0.01;  // output channel 4 of conv1
  EXPECT_NEAR(staged.LossAfterConv1Channel(4), ref::CnnLoss(p, pix, im.labels, 2), 1e-12);
  p["conv1.weight"][40] -= 0.01;
  p["conv2.weight"][5000] -= 0.01;  // output channel 17 of conv2
  EXPECT_NEAR(staged.LossAfterConv2Channel(5000 / 288), ref::CnnLoss(p, pix, im.labels, 2), 1e-12);
  p["conv2.weight"][5000] += 0.01;
  testing::ExpectGradientsMatch(checked, f);
}

// `correct` counts the images whose argmax is the label: with every parameter zero but
// fc.bias[7] = 1 every image's logits favour class 7.
TEST(Cnn, EvaluateCountsTheImagesWhoseArgmaxIsTheLabel) {
  Cnn cnn(CnnConfig{});
  ParameterStore& ps = cnn.params();
  std::fill(ps.flat_params(), ps.flat_params() + ps.numel(), 0.0f);
  for (const ParamInfo& p : ps)
    if (p.name == "fc.bias") ps.flat_params()[p.offset + 7] = 1.0f;
  Images im = RandomImages(10, 4);  // labels 4, 7, 0, 3, 6, 9, 2, 5, 8, 1
  EvalResult r = cnn.Evaluate(im.input());
  EXPECT_EQ(r.count, 10);
  EXPECT_EQ(r.correct, 1);
  im.labels = {7, 7, 1, 7, 2, 3, 7, 7, 0, 7};
  EXPECT_EQ(cnn.Evaluate(im.input()).correct, 6);
}

TEST(Cnn, HookEvaluateAndFlops) {
  Cnn cnn{CnnConfig{}};
  Images im = RandomImages(5, 3);
  Tape tape;
  std::vector<int> order;
  tape.SetParamReadyHook([&](int i) { order.push_back(i); });
  const float loss = [&] {
    Variable l = cnn.Loss(tape, im.input());
    tape.Backward(l, 1.0f);
    return l.data()[0];
  }();
  // Reverse forward order: fc first, conv1 last (weight and bias of a layer in one op).
  ASSERT_EQ(order.size(), 6u);
  EXPECT_TRUE((order[0] == 4 && order[1] == 5) || (order[0] == 5 && order[1] == 4));
  EXPECT_TRUE((order[4] == 0 && order[5] == 1) || (order[4] == 1 && order[5] == 0));
  EvalResult r = cnn.Evaluate(im.input());
  EXPECT_EQ(r.count, 5);
  EXPECT_NEAR(r.loss_sum / r.count, loss, 1e-5);
  // Evaluate with another batch size builds another plan and still agrees with Loss.
  Images one = RandomImages(1, 3);
  EvalResult r1 = cnn.Evaluate(one.input());
  EXPECT_EQ(r1.count, 1);
  Variable l1 = cnn.Loss(tape, one.input());
  EXPECT_NEAR(r1.loss_sum, l1.data()[0], 1e-5);
  tape.Clear();
  // 3 x 2 x (28*28*32*9 + 14*14*64*288 + 3136*10) multiply-adds.
  EXPECT_DOUBLE_EQ(cnn.TrainFlopsPerSample(), 6.0 * (225792 + 3612672 + 31360));
}

}  // namespace
}  // namespace lockstep::nn
