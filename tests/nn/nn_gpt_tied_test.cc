// GPT-2's tied embeddings and padded vocabulary on nn::Gpt: the tied gradient is exactly the
// embedding's part plus the head's (what every parallel layout reproduces), padding rows are
// never predicted and take no gradient from the loss, and generation never emits them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "lockstep/nn/gpt.h"
#include "nn/gpt_fixture.h"

namespace lockstep::nn {
namespace {

using autograd::Tape;
using autograd::Variable;
using testing::Batch;
using testing::RandomBatch;
using testing::Randomize;
using testing::SmallConfig;

GptConfig Padded(bool tied) {
  GptConfig c = SmallConfig();
  c.vocab_pad = 24;  // SmallConfig's vocab rounded up: a few padding rows
  c.tie_embeddings = tied;
  return c;
}

std::vector<float> Grad(const Gpt& g, const std::string& name) {
  const ParameterStore& ps = g.params();
  const tensor::Tensor& t = ps.grad(ps.Find(name));
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(GptTied, ParametersAndCount) {
  const GptConfig c = Padded(true);
  ASSERT_GT(c.padded_vocab(), c.vocab);
  ASSERT_EQ(c.padded_vocab() % 24, 0);
  Gpt tied(c);
  EXPECT_EQ(tied.params().Find("head.weight"), -1);
  EXPECT_EQ(tied.params().info(0).shape, tensor::Shape({c.padded_vocab(), c.width}));
  EXPECT_EQ(tied.params().numel(), GptParamCount(c));
  Gpt untied(Padded(false));
  EXPECT_EQ(untied.params().numel() - tied.params().numel(), c.padded_vocab() * c.width);
  // GPT-2 small as llm.c counts it (padded vocabulary 50304, tied): 124,475,904.
  GptConfig gpt2{50257, 1024, 12, 12, 768, 4, 0, 64, true};
  EXPECT_EQ(gpt2.padded_vocab(), 50304);
  EXPECT_EQ(GptParamCount(gpt2), 124475904);
}

// tied wte.grad == untied wte.grad + untied head.grad, bit for bit, when the untied head holds
// wte's values: the embedding's part plus the head's part, one addition.
TEST(GptTied, TiedGradientIsEmbeddingPartPlusHeadPart) {
  Gpt tied(Padded(true)), untied(Padded(false));
  Randomize(tied.params(), 3);
  ParameterStore& u = untied.params();
  for (const ParamInfo& p : tied.params()) {
    std::memcpy(u.flat_params() + u.info(u.Find(p.name)).offset, tied.params().flat_params() + p.offset,
                p.numel * sizeof(float));
  }
  const ParamInfo& wte = u.info(u.Find("wte.weight"));
  std::memcpy(u.flat_params() + u.info(u.Find("head.weight")).offset, u.flat_params() + wte.offset,
              wte.numel * sizeof(float));
  // Repeated tokens: rows the embedding scatter-adds into several times.
  Batch b = RandomBatch(3, 8, 6, 11);
  for (Gpt* g : {&tied, &untied}) {
    g->params().ZeroGrad();
    Tape tape;
    Variable loss = g->Loss(tape, b.input());
    tape.Backward(loss, 1.0f);
  }
  const std::vector<float> t = Grad(tied, "wte.weight"), e = Grad(untied, "wte.weight"),
                           h = Grad(untied, "head.weight");
  bool any_both = false;
  for (size_t i = 0; i < t.size(); ++i) {
    ASSERT_EQ(t[i], e[i] + h[i]) << i;
    any_both = any_both || (e[i] != 0 && h[i] != 0);
  }
  EXPECT_TRUE(any_both);
  // Every other gradient is the untied model's.
  for (const ParamInfo& p : tied.params())
    EXPECT_EQ(Grad(tied, p.name) == Grad(untied, p.name), p.name != "wte.weight") << p.name;
}

TEST(GptTied, PaddingIsNeverPredicted) {
  const GptConfig c = Padded(true);
  Gpt g(c);
  Randomize(g.params(), 5);
  // Make a padding row's logit the largest by far: it must still change nothing.
  const int64_t C = c.width, pad = c.vocab + 1;
  Batch b = RandomBatch(2, 8, c.vocab, 2);
  Tape tape;
  Variable loss = g.Loss(tape, b.input());
  const float before = loss.data()[0];
  tape.Clear();
  float* row = g.params().flat_params() + pad * C;
  for (int64_t j = 0; j < C; ++j) row[j] = 50.0f;
  g.params().ZeroGrad();
  Variable loss2 = g.Loss(tape, b.input());
  EXPECT_EQ(loss2.data()[0], before);  // the padding logit is outside the softmax
  tape.Backward(loss2, 1.0f);
  const std::vector<float> grad = Grad(g, "wte.weight");
  for (int64_t r = c.vocab; r < c.padded_vocab(); ++r)
    for (int64_t j = 0; j < C; ++j) ASSERT_EQ(grad[r * C + j], 0.0f) << "padding row " << r;
  EvalResult ev = g.Evaluate(b.input());
  EXPECT_NEAR(ev.loss_sum / static_cast<double>(ev.count), before, 1e-5);
  const std::vector<int32_t> out = g.GenerateTokens({1, 2, 3}, 20, 1.0f, 7);
  for (int32_t t : out) EXPECT_LT(t, c.vocab);
  const std::vector<int32_t> greedy = g.GenerateTokens({1, 2, 3}, 5, 0.0f, 7);
  for (int32_t t : greedy) EXPECT_LT(t, c.vocab);
}

TEST(GptTied, TopKSamplesOnlyAmongTheKMostLikely) {
  const GptConfig c = Padded(false);
  Gpt g(c);
  Randomize(g.params(), 9);
  const std::vector<int32_t> one = g.GenerateTokens({4}, 1, 0.0f, 1);  // the argmax
  for (uint64_t seed = 0; seed < 20; ++seed) EXPECT_EQ(g.GenerateTokens({4}, 1, 5.0f, seed, 1), one);
  // Same seed, same tokens.
  EXPECT_EQ(g.GenerateTokens({4, 5}, 12, 0.9f, 3, 5), g.GenerateTokens({4, 5}, 12, 0.9f, 3, 5));
}

}  // namespace
}  // namespace lockstep::nn
