// Gpt: parameter layout and count (the peer's formula), reproducible init, whole-model
// gradients against finite differences of the double reference, the gradient-ready hook
// on the real model, evaluation, FLOP accounting and generation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "lockstep/core/rng.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/tensor/threads.h"
#include "nn/gpt_fixture.h"
#include "nn/grad_check.h"
#include "nn/reference.h"

namespace lockstep::nn {
namespace {

using autograd::Tape;
using autograd::Variable;
using testing::Batch;
using testing::RandomBatch;
using testing::Randomize;
using testing::RandomVector;
using testing::SmallConfig;

TEST(Gpt, ParameterCountLayoutAndNames) {
  Gpt gpt{GptConfig{}};
  const ParameterStore& ps = gpt.params();
  // The peer's sum(p.numel()) for vocab 256, context 128, 4 layers, width 128, MLP x4:
  // wte 32768 + wpe 16384 + 4 * 198272 + lnf 256 + head 32768.
  EXPECT_EQ(ps.numel(), 875264);
  EXPECT_EQ(GptParamCount(GptConfig{}), 875264);
  std::printf("gpt-tiny parameters: %lld (%d tensors)\n", static_cast<long long>(ps.numel()), ps.size());
  const std::vector<std::string> first = {
      "wte.weight",         "wpe.weight",           "blocks.0.ln1.weight", "blocks.0.ln1.bias",   "blocks.0.qkv.weight",
      "blocks.0.qkv.bias",  "blocks.0.proj.weight", "blocks.0.proj.bias",  "blocks.0.ln2.weight", "blocks.0.ln2.bias",
      "blocks.0.fc.weight", "blocks.0.fc.bias",     "blocks.0.fc2.weight", "blocks.0.fc2.bias"};
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(ps.info(i).name, first[i]);
  EXPECT_EQ(ps.size(), 2 + 4 * 12 + 3);
  EXPECT_EQ(ps.info(ps.size() - 1).name, "head.weight");  // no head bias: untied, bias-free
  EXPECT_EQ(ps.info(ps.size() - 1).shape, tensor::Shape({256, 128}));
  EXPECT_EQ(ps.info(ps.Find("blocks.3.fc.weight")).shape, tensor::Shape({512, 128}));
  int64_t off = 0;
  for (const ParamInfo& p : ps) {
    EXPECT_EQ(p.offset, off) << p.name;  // packed, registration order
    off += p.numel;
    const bool matrix = p.shape.size() == 2;
    EXPECT_EQ(p.decay, matrix) << p.name;  // weights and embeddings decay; biases, LN don't
  }
  EXPECT_EQ(off, ps.numel());
  EXPECT_NE(ps.value(0).data<float>(), nullptr);
  EXPECT_EQ(ps.value(1).data<float>(), ps.flat_params() + ps.info(1).offset);
  EXPECT_EQ(ps.grad(1).data<float>(), ps.flat_grads() + ps.info(1).offset);
}

TEST(Gpt, InitIsReproducibleAndGpt2Style) {
  GptConfig c;
  Gpt a(c), b(c);
  const size_t bytes = static_cast<size_t>(a.params().numel()) * sizeof(float);
  EXPECT_EQ(std::memcmp(a.params().flat_params(), b.params().flat_params(), bytes), 0);
  c.init_seed = 1;
  Gpt d(c);
  EXPECT_NE(std::memcmp(a.params().flat_params(), d.params().flat_params(), bytes), 0);
  auto stddev = [&](const char* name) {
    const tensor::Tensor& t = a.params().value(a.params().Find(name));
    double s = 0.0;
    for (float v : t.ToVector()) s += static_cast<double>(v) * v;
    return std::sqrt(s / t.numel());
  };
  EXPECT_NEAR(stddev("wte.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("blocks.1.qkv.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("blocks.1.proj.weight"), 0.02 / std::sqrt(8.0), 0.0005);
  EXPECT_NEAR(stddev("blocks.1.fc2.weight"), 0.02 / std::sqrt(8.0), 0.0005);
  EXPECT_EQ(stddev("blocks.1.fc.bias"), 0.0);
  EXPECT_EQ(a.params().value(a.params().Find("lnf.weight")).ToVector(), std::vector<float>(128, 1.0f));
}

TEST(Gpt, HookFiresOnceForEveryParamWithItsFinalGradient) {
  const GptConfig c = SmallConfig();
  Gpt gpt(c);
  Randomize(gpt.params(), 3);
  ParameterStore& ps = gpt.params();
  Batch batch = RandomBatch(2, 8, c.vocab, 9);
  Tape tape;
  std::vector<int> order;
  std::vector<std::vector<float>> at_hook(ps.size());
  tape.SetParamReadyHook([&](int i) {
    order.push_back(i);
    at_hook[i] = ps.grad(i).ToVector();
  });
  for (int step = 0; step < 2; ++step) {  // the second step reuses the tape and its buffers
    order.clear();
    ps.ZeroGrad();
    tape.Backward(gpt.Loss(tape, batch.input()), 1.0f);
    ASSERT_EQ(static_cast<int>(order.size()), ps.size());
    std::vector<int> seen(ps.size(), 0);
    for (int i : order) ++seen[i];
    for (int i = 0; i < ps.size(); ++i) {
      EXPECT_EQ(seen[i], 1) << ps.info(i).name;
      EXPECT_EQ(at_hook[i], ps.grad(i).ToVector()) << ps.info(i).name << " changed after its hook";
    }
    EXPECT_TRUE(tape.UnusedParams().empty());
    EXPECT_EQ(ps.info(order.front()).name, "head.weight");  // last in forward, first ready
    EXPECT_EQ(ps.info(order.back()).name, "wte.weight");
  }
}

TEST(Gpt, GradientScaleAndAccumulation) {
  // grad_scale 0.5 gives exactly half the gradient (every backward op is linear in
  // d(loss), and scaling by a power of two commutes with rounding); two micro-steps at
  // 0.5 match one at 1 up to summation order (a GEMM with beta = 1 folds the old value
  // into its running sum).
  tensor::ScopedComputeThreads one(1);
  const GptConfig c = SmallConfig();
  Gpt gpt(c);
  Randomize(gpt.params(), 4);
  Batch batch = RandomBatch(2, 8, c.vocab, 10);
  Tape tape;
  ParameterStore& ps = gpt.params();
  ps.ZeroGrad();
  tape.Backward(gpt.Loss(tape, batch.input()), 1.0f);
  std::vector<float> once(ps.flat_grads(), ps.flat_grads() + ps.numel());
  ps.ZeroGrad();
  tape.Backward(gpt.Loss(tape, batch.input()), 0.5f);
  float scale = 0.0f;
  for (int64_t i = 0; i < ps.numel(); ++i) {
    ASSERT_EQ(ps.flat_grads()[i], 0.5f * once[i]) << i;
    scale = std::max(scale, std::fabs(once[i]));
  }
  tape.Backward(gpt.Loss(tape, batch.input()), 0.5f);
  for (int64_t i = 0; i < ps.numel(); ++i) {
    ASSERT_NEAR(ps.flat_grads()[i], once[i], 1e-6f * scale) << i;
  }
}

// `correct` counts the rows whose argmax is the target: with every parameter zero but
// lnf.bias[0] = 1 and head.weight[k, 0] = 1 each position's logits are 1 for token k and 0
// elsewhere, so exactly the rows whose target is k are correct.
TEST(Gpt, EvaluateCountsTheRowsWhoseArgmaxIsTheTarget) {
  const GptConfig c = SmallConfig();
  Gpt gpt(c);
  ParameterStore& ps = gpt.params();
  std::fill(ps.flat_params(), ps.flat_params() + ps.numel(), 0.0f);
  const int32_t k = 5;
  for (const ParamInfo& p : ps) {
    if (p.name == "lnf.bias") ps.flat_params()[p.offset] = 1.0f;
    if (p.name == "head.weight") ps.flat_params()[p.offset + k * c.width] = 1.0f;
  }
  Batch batch = RandomBatch(3, 8, c.vocab, 11);
  int64_t want = 0;
  for (size_t i = 0; i < batch.targets.size(); ++i) {
    batch.targets[i] = i % 3 == 0 ? k : (k + 1 + static_cast<int32_t>(i)) % static_cast<int32_t>(c.vocab);
    if (batch.targets[i] == k) ++want;
  }
  batch.targets[1] = -1;  // an ignored row counts neither way
  EvalResult r = gpt.Evaluate(batch.input());
  EXPECT_EQ(r.count, 23);
  EXPECT_EQ(r.correct, want);
  EXPECT_GT(want, 0);
}

TEST(Gpt, EvaluateMatchesLossAndReusesBuffers) {
  const GptConfig c = SmallConfig();
  Gpt gpt(c);
  Randomize(gpt.params(), 5);
  Batch batch = RandomBatch(3, 8, c.vocab, 11);
  batch.targets[0] = -1;
  Tape tape;
  const float loss = gpt.Loss(tape, batch.input()).data()[0];
  tape.Clear();
  EvalResult r = gpt.Evaluate(batch.input());
  EXPECT_EQ(r.count, 23);
  EXPECT_NEAR(r.loss_sum / r.count, loss, 1e-5);
  // Training steps reuse activation buffers: after the first, at most the few buffers the
  // caller still held (the loss) are allocated anew.
  const Variable warm = gpt.Loss(tape, batch.input());
  tape.Backward(warm, 1.0f);
  const int64_t before = tape.pool().allocations();
  tape.Backward(gpt.Loss(tape, batch.input()), 1.0f);
  EXPECT_LE(tape.pool().allocations() - before, 2);
}

TEST(Gpt, TrainFlopsPerSample) {
  Gpt gpt{GptConfig{}};
  // Per token forward: 2 * (4 layers * 12 * 128^2 + 128 * 256) for the matmuls, plus the causal
  // attention of 4 layers: QK^T and AV over (T+1)/2 keys on average, 2 * 129 * 128 each layer.
  EXPECT_DOUBLE_EQ(gpt.TrainFlopsPerSample(), 3.0 * (1638400.0 + 4 * 2 * 129 * 128) * 128.0);
}

TEST(Gpt, GenerateIsDeterministic) {
  GptConfig c = SmallConfig();
  Gpt gpt(c);
  Randomize(gpt.params(), 6);
  const std::string a = gpt.Generate("Hello", 12, 1.0f, 42);
  EXPECT_EQ(a.size(), 12u);  // 5 + 12 > context 8: the window slides
  EXPECT_EQ(gpt.Generate("Hello", 12, 1.0f, 42), a);
  EXPECT_NE(gpt.Generate("Hello", 12, 1.0f, 43), a);
  const std::string g = gpt.Generate("", 4, 0.0f, 1);  // greedy from "\n": seed unused
  EXPECT_EQ(g, gpt.Generate("", 4, 0.0f, 2));
}

}  // namespace
}  // namespace lockstep::nn
