#include "lockstep/data/data_config.h"

#include <gtest/gtest.h>

#include "lockstep/data/byte_corpus.h"

namespace lockstep::data {
namespace {

TEST(DataConfig, DefaultsAndOverrides) {
  auto c = Config::Parse("[train]\nbatch_size = 16\n", "t.toml");
  ASSERT_TRUE(c.ok());
  auto d = ReadDataConfig(*c, DatasetKind::kText, 16);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->dir, kDefaultCorpusDir);
  EXPECT_EQ(d->final_batch, FinalBatch::kDrop);
  EXPECT_EQ(d->eval_batch_size, 16);
  EXPECT_EQ(d->eval_batches, 0);

  c = Config::Parse("[data]\ndir = \"/x\"\nfinal_batch = \"pad\"\n[eval]\nbatch_size = 100\nbatches = 4\n", "t.toml");
  d = ReadDataConfig(*c, DatasetKind::kFashionMnist, 64);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->dir, "/x");
  EXPECT_EQ(d->final_batch, FinalBatch::kPad);
  EXPECT_EQ(d->eval_batch_size, 100);
  EXPECT_EQ(d->eval_batches, 4);
  SamplerOptions t = TrainSampling(*d, 64, 2, 1, 7);
  EXPECT_EQ(t.seed, DataSeed(7));
  EXPECT_NE(t.seed, 7u);
  EXPECT_EQ(t.final_batch, FinalBatch::kPad);
  SamplerOptions e = EvalSampling(*d, 2, 1);
  EXPECT_EQ(e.global_batch, 100);
  EXPECT_EQ(e.batch_key, "eval.batch_size");
}

TEST(DataConfig, BadValuesNameTheKey) {
  for (auto [toml, key] :
       {std::pair{"[data]\nfinal_batch = \"keep\"\n", "data.final_batch"},
        std::pair{"[eval]\nbatch_size = 0\n", "eval.batch_size"}, std::pair{"[eval]\nbatches = -1\n", "eval.batches"},
        std::pair{"[data]\ndir = 3\n", "data.dir"}}) {
    auto c = Config::Parse(toml, "t.toml");
    ASSERT_TRUE(c.ok());
    auto d = ReadDataConfig(*c, DatasetKind::kText, 16);
    ASSERT_FALSE(d.ok()) << toml;
    EXPECT_NE(d.status().ToString().find(key), std::string::npos) << d.status().ToString();
  }
}

}  // namespace
}  // namespace lockstep::data
