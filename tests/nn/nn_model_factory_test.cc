// MakeModel: config keys, defaults, validation messages naming the key, and unknown-key
// detection through the Config getters. Also ParameterStore basics.
#include <gtest/gtest.h>

#include "lockstep/nn/cnn.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/nn/model.h"

namespace lockstep::nn {
namespace {

Config Parse(const std::string& text) {
  auto c = Config::Parse(text, "test.toml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

std::string ErrorOf(const std::string& text) {
  Config cfg = Parse(text);
  auto m = MakeModel(cfg);
  EXPECT_FALSE(m.ok());
  if (m.ok()) return "";
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message().find('\n'), std::string::npos);  // one line
  return m.status().message();
}

TEST(MakeModel, GptWithOverridesAndAllKeysKnown) {
  Config cfg = Parse(
      "[model]\nkind = \"gpt\"\nlayers = 2\nwidth = 32\nheads = 2\ncontext = 16\n"
      "mlp_ratio = 2\ninit_seed = 5\nvocab = 256\n");
  auto m = MakeModel(cfg);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->name(), "gpt");
  auto* gpt = dynamic_cast<Gpt*>(m->get());
  ASSERT_NE(gpt, nullptr);
  EXPECT_EQ(gpt->config().layers, 2);
  EXPECT_EQ(gpt->config().width, 32);
  EXPECT_EQ(gpt->config().mlp_ratio, 2);
  EXPECT_EQ(gpt->config().init_seed, 5u);
  EXPECT_EQ((*m)->params().numel(), GptParamCount(gpt->config()));
  EXPECT_TRUE(cfg.UnreadKeys().empty());
}

TEST(MakeModel, GptDefaultsAreGptTiny) {
  Config cfg = Parse("[model]\nkind = \"gpt\"\n");
  auto m = MakeModel(cfg);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->params().numel(), 875264);
}

TEST(MakeModel, CnnAndItsKeys) {
  Config cfg = Parse("[model]\nkind = \"cnn\"\ninit_seed = 2\n");
  auto m = MakeModel(cfg);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->name(), "cnn");
  EXPECT_EQ((*m)->params().numel(), 50186);
  EXPECT_TRUE(cfg.UnreadKeys().empty());
  // The CNN does not read a GPT key.
  Config bad = Parse("[model]\nkind = \"cnn\"\nwidth = 64\n");
  ASSERT_TRUE(MakeModel(bad).ok());
  EXPECT_EQ(bad.UnreadKeys(), std::vector<std::string>{"model.width"});
}

TEST(MakeModel, ErrorsNameTheKey) {
  EXPECT_NE(ErrorOf("[model]\nlayers = 2\n").find("model.kind"), std::string::npos);
  EXPECT_NE(ErrorOf("[model]\nkind = \"rnn\"\n").find("model.kind"), std::string::npos);
  std::string e = ErrorOf("[model]\nkind = \"gpt\"\nwidth = 130\nheads = 4\n");
  EXPECT_NE(e.find("model.width"), std::string::npos) << e;
  EXPECT_NE(e.find("model.heads"), std::string::npos) << e;
  EXPECT_NE(ErrorOf("[model]\nkind = \"gpt\"\nlayers = 0\n").find("model.layers"), std::string::npos);
  EXPECT_NE(ErrorOf("[model]\nkind = \"gpt\"\nvocab = -3\n").find("model.vocab"), std::string::npos);
  EXPECT_NE(ErrorOf("[model]\nkind = \"gpt\"\ncontext = 0\n").find("model.context"), std::string::npos);
  EXPECT_NE(ErrorOf("[model]\nkind = \"gpt\"\nmlp_ratio = 0\n").find("model.mlp_ratio"), std::string::npos);
  EXPECT_NE(ErrorOf("[model]\nkind = \"gpt\"\nheads = 0\n").find("model.heads"), std::string::npos);
  EXPECT_NE(ErrorOf("[model]\nkind = \"gpt\"\nwidth = \"wide\"\n").find("model.width"), std::string::npos);
  EXPECT_NE(ErrorOf("[model]\nkind = \"cnn\"\ninit_seed = -1\n").find("model.init_seed"), std::string::npos);
}

TEST(ParameterStore, FlatBuffersViewsAndZeroGrad) {
  ParameterStore ps;
  EXPECT_EQ(ps.Add("a.weight", {3, 4}, Init::Normal(1.0f), true), 0);
  EXPECT_EQ(ps.Add("a.bias", {4}, Init::Zeros(), false), 1);
  EXPECT_EQ(ps.Add("ln.weight", {5}, Init::Ones(), false), 2);
  ps.Finalize(11);
  EXPECT_EQ(ps.numel(), 21);
  EXPECT_EQ(ps.info(1).offset, 12);
  EXPECT_EQ(ps.info(2).offset, 16);
  EXPECT_EQ(ps.Find("ln.weight"), 2);
  EXPECT_EQ(ps.Find("nope"), -1);
  EXPECT_EQ(ps.params_tensor().tag(), tensor::MemoryTag::kParameter);
  EXPECT_EQ(ps.grads_tensor().tag(), tensor::MemoryTag::kGradient);
  // Views alias the flat buffers.
  ps.flat_params()[13] = 7.0f;
  EXPECT_EQ(ps.value(1).ToVector()[1], 7.0f);
  ps.var(2).GradAccumulate()[4] = 3.0f;
  EXPECT_EQ(ps.flat_grads()[20], 3.0f);
  ps.ZeroGrad();
  EXPECT_EQ(ps.flat_grads()[20], 0.0f);
  EXPECT_EQ(ps.value(2).ToVector(), std::vector<float>(5, 1.0f));
  // Init is a function of (seed, name, element): the same name gives the same values in
  // another store whatever its position.
  ParameterStore other;
  other.Add("first", {2}, Init::Zeros(), false);
  other.Add("a.weight", {3, 4}, Init::Normal(1.0f), true);
  other.Finalize(11);
  EXPECT_EQ(other.value(1).ToVector(), ps.value(0).ToVector());
  // A shard can be initialised alone: elements 5..11 of a.weight.
  std::vector<float> shard(7);
  InitValues(shard.data(), 7, Init::Normal(1.0f), "a.weight", 11, 5);
  std::vector<float> full = ps.value(0).ToVector();
  EXPECT_EQ(shard, std::vector<float>(full.begin() + 5, full.end()));
  ps.Initialize(11);
  EXPECT_EQ(ps.value(0).ToVector(), full);
}

}  // namespace
}  // namespace lockstep::nn
