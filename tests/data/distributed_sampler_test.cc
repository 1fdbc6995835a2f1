#include "lockstep/data/distributed_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace lockstep::data {
namespace {

SamplerOptions Opts(int64_t s, int64_t g, int64_t n, int64_t r, FinalBatch fb = FinalBatch::kDrop) {
  SamplerOptions o;
  o.dataset_size = s;
  o.global_batch = g;
  o.world_size = n;
  o.rank = r;
  o.seed = 1234;
  o.final_batch = fb;
  return o;
}

DistributedSampler Make(const SamplerOptions& o) {
  auto s = DistributedSampler::Create(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

TEST(DistributedSampler, EpochIsAPermutationAndEpochsDiffer) {
  auto s = Make(Opts(1000, 10, 1, 0));
  auto p0 = s.Permutation(0);
  std::vector<int64_t> e0(p0.begin(), p0.end()), sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(e0, iota);
  auto p1 = s.Permutation(1);
  EXPECT_NE(e0, std::vector<int64_t>(p1.begin(), p1.end()));
  // Same seed, same epoch, fresh sampler: same permutation (pure function of seed, epoch).
  auto again = Make(Opts(1000, 10, 1, 0));
  auto q0 = again.Permutation(0);
  EXPECT_EQ(e0, std::vector<int64_t>(q0.begin(), q0.end()));
}

TEST(DistributedSampler, FisherYatesIsRoughlyUniform) {
  // First element of 4000 permutations of 4 items: each value ~1000 times (sd ~27).
  auto s = Make(Opts(4, 1, 1, 0));
  std::vector<int> count(4);
  for (int e = 0; e < 4000; ++e) ++count[static_cast<size_t>(s.Permutation(e)[0])];
  for (int c : count) EXPECT_NEAR(c, 1000, 150);
}

TEST(DistributedSampler, RanksSplitEachGlobalBatchIdenticallyForAnyWorldSize) {
  const int64_t S = 103, G = 8;
  auto single = Make(Opts(S, G, 1, 0));
  for (int64_t n : {1, 2, 4}) {
    std::vector<DistributedSampler> ranks;
    for (int64_t r = 0; r < n; ++r) ranks.push_back(Make(Opts(S, G, n, r)));
    auto reference = Make(Opts(S, G, 1, 0));
    for (int step = 0; step < 30; ++step) {  // spans 2+ epochs (12 batches each)
      std::vector<int64_t> want, got, part;
      reference.Next(&want);
      for (auto& rank : ranks) {
        rank.Next(&part);
        ASSERT_EQ(part.size(), static_cast<size_t>(G / n));
        got.insert(got.end(), part.begin(), part.end());
      }
      EXPECT_EQ(got, want) << "n=" << n << " step " << step;
      // The global batch itself is visible to every rank.
      std::vector<int64_t> global;
      ranks.back().GlobalBatch(step / 12, step % 12, &global);
      EXPECT_EQ(global, want);
    }
  }
}

TEST(DistributedSampler, DivisibilityErrorSuggestsSizes) {
  auto r = DistributedSampler::Create(Opts(100, 10, 4, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "train.batch_size 10 is not divisible by the world size 4 (try 8 or 12)");
  r = DistributedSampler::Create(Opts(100, 3, 4, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "train.batch_size 3 is not divisible by the world size 4 (try 4)");
  EXPECT_FALSE(DistributedSampler::Create(Opts(100, 8, 4, 4)).ok());  // rank outside world
  EXPECT_FALSE(DistributedSampler::Create(Opts(5, 8, 1, 0)).ok());    // drop leaves no batch
  EXPECT_TRUE(DistributedSampler::Create(Opts(5, 8, 1, 0, FinalBatch::kPad)).ok());
}

TEST(DistributedSampler, DropVersusPadVersusMask) {
  // S = 10, G = 4: two full batches, then 2 leftover samples.
  auto drop = Make(Opts(10, 4, 2, 1, FinalBatch::kDrop));
  auto pad = Make(Opts(10, 4, 2, 1, FinalBatch::kPad));
  auto mask = Make(Opts(10, 4, 2, 1, FinalBatch::kMask));
  EXPECT_EQ(drop.BatchesPerEpoch(), 2);
  EXPECT_EQ(pad.BatchesPerEpoch(), 3);
  EXPECT_EQ(mask.BatchesPerEpoch(), 3);
  auto perm = pad.Permutation(0);
  std::vector<int64_t> last;
  pad.GlobalBatch(0, 2, &last);
  EXPECT_EQ(last, (std::vector<int64_t>{perm[8], perm[9], perm[0], perm[1]}));  // wraps to the start
  mask.GlobalBatch(0, 2, &last);
  EXPECT_EQ(last, (std::vector<int64_t>{perm[8], perm[9], -1, -1}));
  std::vector<int64_t> local;
  mask.LocalBatch(0, 2, &local);  // rank 1 of 2 gets the masked half
  EXPECT_EQ(local, (std::vector<int64_t>{-1, -1}));
  // Drop: after two batches the next epoch starts.
  drop.Next(&local);
  drop.Next(&local);
  EXPECT_EQ(drop.State().epoch, 1);
  EXPECT_EQ(drop.State().batch_in_epoch, 0);
}

TEST(DistributedSampler, RestoreContinuesTheExactSequence) {
  auto a = Make(Opts(50, 6, 2, 1, FinalBatch::kPad));
  std::vector<int64_t> x;
  for (int i = 0; i < 11; ++i) a.Next(&x);  // 9 batches per epoch: now in epoch 1
  LoaderState saved = a.State();
  EXPECT_EQ(saved.epoch, 1);
  EXPECT_EQ(saved.batch_in_epoch, 2);
  SamplerOptions other = Opts(50, 6, 2, 1, FinalBatch::kPad);
  other.seed = 99;  // the state's seed wins
  auto b = Make(other);
  ASSERT_TRUE(b.Restore(saved).ok());
  for (int i = 0; i < 20; ++i) {
    std::vector<int64_t> ya, yb;
    a.Next(&ya);
    b.Next(&yb);
    EXPECT_EQ(ya, yb) << i;
  }
  EXPECT_EQ(a.State(), b.State());
  LoaderState bad = saved;
  bad.batch_in_epoch = 9;
  EXPECT_EQ(b.Restore(bad).code(), StatusCode::kInvalidArgument);
}

TEST(DistributedSampler, ParseFinalBatch) {
  EXPECT_EQ(*ParseFinalBatch("drop", "data.final_batch"), FinalBatch::kDrop);
  EXPECT_EQ(*ParseFinalBatch("pad", "data.final_batch"), FinalBatch::kPad);
  auto r = ParseFinalBatch("keep", "data.final_batch");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("data.final_batch"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::data
