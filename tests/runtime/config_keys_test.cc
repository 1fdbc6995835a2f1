// The registry of config keys (runtime/setup/config_keys.h) against the readers of the
// layers: every key a reader reads is registered, every registered default is the one the
// reader uses, an unknown key is an error and a known-but-unused one only a warning.
#include "lockstep/runtime/setup/config_keys.h"

#include <gtest/gtest.h>

#include <set>

#include "lockstep/nn/model.h"
#include "lockstep/optim/optim_config.h"
#include "lockstep/runtime/setup/run_config.h"

namespace lockstep::runtime {
namespace {

// Reads `toml` the way `lockstep train` does (run sections, model, optimizer).
Config ReadAll(const std::string& toml) {
  auto c = Config::Parse(toml, "t.toml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(ReadRunConfig(*c).ok());
  EXPECT_TRUE(nn::MakeModel(*c).ok());
  EXPECT_TRUE(optim::ReadOptimConfig(*c, 100).ok());
  return *c;
}

// Minimal configs that between them read every key, each left at its default.
const char* kGptAdamwCosine =
    "[model]\nkind = \"gpt\"\n[data]\nkind = \"text\"\n[optim]\nschedule = \"cosine\"\n[train]\nsteps = 10\n";
const char* kCnnSgd =
    "[model]\nkind = \"cnn\"\n[data]\nkind = \"fashion-mnist\"\n[optim]\nname = \"sgd\"\n[train]\nepochs = 1\n";
const char* kGptTokens = "[model]\nkind = \"gpt\"\n[data]\nkind = \"tokens\"\ntrain = \"t.bin\"\n[train]\nsteps = 10\n";
const char* kLlama = "[model]\nkind = \"llama\"\n[data]\nkind = \"text\"\n[train]\nsteps = 10\n";

TEST(ConfigKeys, EveryKeyReadIsRegisteredWithTheReadersDefault) {
  std::set<std::string> checked;
  for (const char* toml : {kGptAdamwCosine, kCnnSgd, kGptTokens, kLlama}) {
    Config c = ReadAll(toml);
    for (const std::string& key : c.ReadKeys()) {
      const ConfigKey* k = FindConfigKey(key);
      ASSERT_NE(k, nullptr) << key << " is read but not in the registry";
      if (c.Origin(key) != "default" || *k->default_value == 0) continue;
      EXPECT_EQ(*c.EffectiveValue(key), k->default_value) << key;
      checked.insert(key);
    }
  }
  // Every registered default was compared with a reader's.
  for (const ConfigKey& k : AllConfigKeys()) {
    const bool has_default = *k.default_value != 0;
    EXPECT_TRUE(!has_default || checked.count(k.name)) << k.name << "'s default was never checked";
  }
}

TEST(ConfigKeys, UnknownKeyIsAnErrorWithASuggestion) {
  Config c = ReadAll(std::string(kGptAdamwCosine) + "[eval]\nevery = 5\nbatchs = 2\n");
  auto r = CheckConfigKeys(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "unknown config key 'eval.batchs' (did you mean 'eval.batches'?)");
  Config far = ReadAll(std::string(kGptAdamwCosine) + "[eval]\ncolour = 2\n");
  EXPECT_EQ(CheckConfigKeys(far).status().message(), "unknown config key 'eval.colour'");
}

TEST(ConfigKeys, AKnownKeyTheOptionsIgnoreIsAWarning) {
  // optim.min_lr belongs to the cosine schedule; with "constant" nobody reads it.
  Config c = ReadAll(
      "[model]\nkind = \"gpt\"\n[data]\nkind = \"text\"\n[optim]\nschedule = \"constant\"\nmin_lr = 1e-4\n"
      "momentum = 0.9\n[train]\nsteps = 10\n");
  auto r = CheckConfigKeys(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0], "config key 'optim.min_lr' is not used with this run's options and is ignored");
  EXPECT_NE((*r)[1].find("optim.momentum"), std::string::npos);
}

TEST(ConfigKeys, DescribeShowsValuesAndOrigins) {
  auto c = Config::Parse(kGptAdamwCosine, "t.toml");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->Override("optim.lr=3e-4").ok());
  ASSERT_TRUE(c->Override("optim.momentum=0.5").ok());
  ASSERT_TRUE(ReadRunConfig(*c).ok());
  ASSERT_TRUE(nn::MakeModel(*c).ok());
  ASSERT_TRUE(optim::ReadOptimConfig(*c, 100).ok());
  const std::string text = DescribeConfig(*c);
  auto line_of = [&](const std::string& key) {
    size_t at = text.find(key + " ");
    EXPECT_NE(at, std::string::npos) << key;
    return text.substr(at, text.find('\n', at) - at);
  };
  EXPECT_NE(line_of("optim.lr").find("= 3e-04"), std::string::npos) << line_of("optim.lr");
  EXPECT_NE(line_of("optim.lr").find("# --set"), std::string::npos) << line_of("optim.lr");
  EXPECT_NE(line_of("optim.schedule").find("# file"), std::string::npos);
  EXPECT_NE(line_of("optim.beta1").find("= 0.9"), std::string::npos);
  EXPECT_NE(line_of("optim.beta1").find("# default"), std::string::npos);
  EXPECT_NE(line_of("optim.momentum").find("# --set, unused"), std::string::npos) << line_of("optim.momentum");
  EXPECT_NE(line_of("optim.nesterov").find("# unused"), std::string::npos);
  size_t lines = 0;
  for (char ch : text) lines += ch == '\n';
  EXPECT_EQ(lines, AllConfigKeys().size());
}

}  // namespace
}  // namespace lockstep::runtime
