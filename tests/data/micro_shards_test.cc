#include "lockstep/data/micro_shards.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "lockstep/data/distributed_sampler.h"

namespace lockstep::data {
namespace {

TEST(MicroShards, ShardIndicesAreContiguousSlices) {
  std::vector<int64_t> batch(16);
  std::iota(batch.begin(), batch.end(), 100);
  auto s = ShardIndices(batch, 4, 2);
  EXPECT_EQ(std::vector<int64_t>(s.begin(), s.end()), (std::vector<int64_t>{108, 109, 110, 111}));
}

TEST(MicroShards, RankLocalBatchIsItsShardsInOrder) {
  // G = 16, V = 8 shards of 2; with N = 2 rank r holds shards [4r, 4r + 4).
  SamplerOptions o;
  o.dataset_size = 64;
  o.global_batch = 16;
  o.seed = 5;
  auto layout = MicroShardLayout::Create(16, 8, 2);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->shard_size(), 2);
  EXPECT_EQ(layout->shards_per_rank(), 4);
  auto global_sampler = DistributedSampler::Create(o);
  std::vector<int64_t> global;
  global_sampler->GlobalBatch(0, 1, &global);
  for (int64_t r = 0; r < 2; ++r) {
    o.world_size = 2;
    o.rank = r;
    auto sampler = DistributedSampler::Create(o);
    std::vector<int64_t> local;
    sampler->LocalBatch(0, 1, &local);
    for (int64_t k = 0; k < layout->shards_per_rank(); ++k) {
      auto mine = layout->LocalShard(local, k);
      auto canonical = layout->ShardIndices(global, layout->first_shard_of(r) + k);
      EXPECT_EQ(std::vector<int64_t>(mine.begin(), mine.end()),
                std::vector<int64_t>(canonical.begin(), canonical.end()));
    }
  }
}

TEST(MicroShards, Validation) {
  EXPECT_FALSE(MicroShardLayout::Create(24, 6, 1).ok());  // 6 is not a power of two
  EXPECT_FALSE(MicroShardLayout::Create(12, 8, 1).ok());  // 12 % 8 != 0
  auto r = MicroShardLayout::Create(16, 4, 8);            // more workers than shards
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("world size 8"), std::string::npos);
  EXPECT_FALSE(MicroShardLayout::Create(16, 4, 3).ok());  // 3 does not divide 4
  EXPECT_TRUE(MicroShardLayout::Create(16, 16, 4).ok());
}

}  // namespace
}  // namespace lockstep::data
