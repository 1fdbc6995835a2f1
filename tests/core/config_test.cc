#include "lockstep/core/config.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

TEST(Config, ReadsTypedValuesAndDefaults) {
  auto c = Config::Parse("[optim]\nlr = 0.001\n[train]\nbatch_size = 16\nname = \"x\"\n", "t.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(*c->GetDouble("optim.lr", 1.0), 0.001);
  EXPECT_EQ(*c->GetInt("train.batch_size", 0), 16);
  EXPECT_EQ(*c->GetString("train.name", ""), "x");
  EXPECT_EQ(*c->GetInt("train.steps", 7), 7);
  EXPECT_TRUE(c->UnreadKeys().empty());
}

TEST(Config, WrongTypeNamesKeyAndExpectation) {
  auto c = Config::Parse("[train]\nbatch_size = \"big\"\n", "t.toml");
  ASSERT_TRUE(c.ok());
  auto v = c->GetInt("train.batch_size", 0);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("train.batch_size"), std::string::npos);
  EXPECT_NE(v.status().message().find("integer"), std::string::npos);
}

TEST(Config, UnreadKeysAreListed) {
  auto c = Config::Parse("[train]\nbatch_size = 16\nbatch_sise = 3\n", "t.toml");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->GetInt("train.batch_size", 0).ok());
  EXPECT_EQ(c->UnreadKeys(), std::vector<std::string>{"train.batch_sise"});
}

TEST(Config, RecordsEffectiveValuesAndOrigins) {
  auto c = Config::Parse("[optim]\nlr = 0.001\nname = \"adamw\"\n[train]\nbatch_size = 16\n", "t.toml");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->Override("train.batch_size=32").ok());
  c->SetInt("train.steps", 5);
  EXPECT_EQ(c->EffectiveValue("optim.lr"), nullptr);  // not read yet
  ASSERT_TRUE(c->GetDouble("optim.lr", 1.0).ok());
  ASSERT_TRUE(c->GetInt("train.batch_size", 0).ok());
  ASSERT_TRUE(c->GetString("optim.name", "").ok());
  ASSERT_TRUE(c->GetDouble("optim.eps", 1e-8).ok());
  ASSERT_TRUE(c->GetSize("train.bucket_bytes", 25 << 20).ok());
  EXPECT_EQ(*c->EffectiveValue("optim.lr"), "0.001");
  EXPECT_EQ(*c->EffectiveValue("train.batch_size"), "32");
  EXPECT_EQ(*c->EffectiveValue("optim.name"), "\"adamw\"");
  EXPECT_EQ(*c->EffectiveValue("optim.eps"), "1e-08");
  EXPECT_EQ(*c->EffectiveValue("train.bucket_bytes"), "26214400");
  EXPECT_EQ(c->Origin("optim.lr"), "file");
  EXPECT_EQ(c->Origin("train.batch_size"), "--set");
  EXPECT_EQ(c->Origin("train.steps"), "flag");
  EXPECT_EQ(c->Origin("optim.eps"), "default");
  EXPECT_EQ(c->ValueText("train.steps"), "5");
  EXPECT_EQ(c->UnreadKeys(), std::vector<std::string>{"train.steps"});
}

TEST(Config, OverrideParsesTomlValuesAndBareStrings) {
  auto c = Config::Parse("[optim]\nlr = 0.1\n", "t.toml");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->Override("optim.lr=3e-4").ok());
  ASSERT_TRUE(c->Override("optim.name=adamw").ok());
  ASSERT_TRUE(c->Override("train.steps=5").ok());
  EXPECT_DOUBLE_EQ(*c->GetDouble("optim.lr", 0), 3e-4);
  EXPECT_EQ(*c->GetString("optim.name", ""), "adamw");
  EXPECT_EQ(*c->GetInt("train.steps", 0), 5);
  EXPECT_FALSE(c->Override("nodot=1").ok());
  EXPECT_FALSE(c->Override("optim.lr").ok());
}

TEST(Config, SyntaxErrorNamesFileAndLine) {
  auto c = Config::Parse("[optim]\nlr = = 3\n", "bad.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("bad.toml:2"), std::string::npos) << c.status().message();
}

TEST(Config, HashIsOrderIndependent) {
  auto a = Config::Parse("[a]\nx = 1\ny = 2\n", "a");
  auto b = Config::Parse("[a]\ny = 2\nx = 1\n", "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->Hash(), b->Hash());
  ASSERT_TRUE(b->Override("a.x=3").ok());
  EXPECT_NE(a->Hash(), b->Hash());
}

TEST(Config, HashWithoutIgnoresOnlyTheNamedEntries) {
  auto a = Config::Parse("[a]\nx = 1\ny = 2\n[b]\nz = 3\n", "a");
  ASSERT_TRUE(a.ok());
  Config b = *a;
  ASSERT_TRUE(b.Override("a.y=5").ok());
  ASSERT_TRUE(b.Override("b.z=9").ok());
  EXPECT_NE(a->Hash(), b.Hash());
  EXPECT_EQ(a->HashWithout({"a.y", "b"}), b.HashWithout({"a.y", "b"}));
  EXPECT_NE(a->HashWithout({"a.y"}), b.HashWithout({"a.y"}));  // b.z still differs
  ASSERT_TRUE(b.Override("a.x=7").ok());
  EXPECT_NE(a->HashWithout({"a.y", "b"}), b.HashWithout({"a.y", "b"}));
  EXPECT_EQ(a->Hash(), Config(*a).Hash());  // the original tree is not modified
}

TEST(ParseSize, Suffixes) {
  EXPECT_EQ(*ParseSize("4096", "x"), 4096);
  EXPECT_EQ(*ParseSize("64K", "x"), 65536);
  EXPECT_EQ(*ParseSize("25M", "x"), 25 * 1024 * 1024);
  EXPECT_EQ(*ParseSize("1G", "x"), 1024LL * 1024 * 1024);
  EXPECT_FALSE(ParseSize("", "x").ok());
  EXPECT_FALSE(ParseSize("12Q", "x").ok());
  EXPECT_FALSE(ParseSize("-5", "x").ok());
  EXPECT_FALSE(ParseSize("M", "x").ok());
}

}  // namespace
}  // namespace lockstep
