#include "lockstep/data/text_loaders.h"

#include <gtest/gtest.h>

#include <set>

#include "lockstep/core/rng.h"

namespace lockstep::data {
namespace {

constexpr int64_t kT = 16;

std::shared_ptr<const ByteCorpus> RandomCorpus(int64_t n) {
  Rng rng(77, 0);
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  for (auto& b : bytes) b = static_cast<uint8_t>(rng.NextU32());
  return std::make_shared<ByteCorpus>(ByteCorpus::FromBytes(std::move(bytes), "random"));
}

SamplerOptions Sampling(int64_t g, int64_t n = 1, int64_t r = 0) {
  SamplerOptions o;
  o.global_batch = g;
  o.world_size = n;
  o.rank = r;
  o.seed = 42;
  return o;
}

// Finds where each window came from: with random bytes a 17-byte string occurs once.
int64_t FindStart(std::span<const uint8_t> src, const int32_t* x, const int32_t* y) {
  for (int64_t s = 0; s + kT + 1 <= static_cast<int64_t>(src.size()); ++s) {
    bool match = true;
    for (int64_t i = 0; i < kT && match; ++i) match = src[s + i] == x[i] && src[s + i + 1] == y[i];
    if (match) return s;
  }
  return -1;
}

TEST(TextLoaders, TrainEpochTilesTheSplitFromARandomOffset) {
  auto corpus = RandomCorpus(2000);  // 1800 train bytes: K = 1800/16 - 1 = 111 windows
  const int64_t k_windows = TrainWindowsPerEpoch(1800, kT);
  ASSERT_EQ(k_windows, 111);
  auto loader = MakeTextTrainLoader(corpus, kT, Sampling(3));
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  ASSERT_EQ((*loader)->StepsPerEpoch(), 37);
  std::set<int64_t> offsets;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const int64_t offset = TrainWindowOffset(42, epoch, kT);
    ASSERT_GE(offset, 0);
    ASSERT_LT(offset, kT);
    offsets.insert(offset);
    std::set<int64_t> starts;
    TextBatch b;
    for (int64_t step = 0; step < 37; ++step) {
      ASSERT_TRUE((*loader)->Next(&b).ok());
      ASSERT_EQ(b.B, 3);
      ASSERT_EQ(b.T, kT);
      ASSERT_EQ(b.valid, 3);
      for (int64_t row = 0; row < 3; ++row) {
        // y is x shifted by one byte of the corpus, and the window lies in the train split.
        int64_t s = FindStart(corpus->train(), b.x.data() + row * kT, b.y.data() + row * kT);
        ASSERT_GE(s, 0);
        EXPECT_EQ((s - offset) % kT, 0);
        starts.insert(s);
      }
    }
    // Every window of the grid exactly once (111 distinct starts, 111 windows).
    EXPECT_EQ(starts.size(), 111u);
    EXPECT_EQ(*starts.begin(), offset);
    EXPECT_EQ(*starts.rbegin(), offset + 110 * kT);
    EXPECT_LE(*starts.rbegin() + kT + 1, 1800);
    EXPECT_EQ((*loader)->State().epoch, epoch + 1);
  }
  EXPECT_GT(offsets.size(), 1u);  // the tiling moves between epochs (offsets 3 draws of 16)
}

TEST(TextLoaders, RanksTogetherSeeTheSingleWorkerBatch) {
  auto corpus = RandomCorpus(5000);
  auto one = MakeTextTrainLoader(corpus, kT, Sampling(4));
  ASSERT_TRUE(one.ok());
  for (int64_t n : {2, 4}) {
    std::vector<std::unique_ptr<TextLoader>> ranks;
    for (int64_t r = 0; r < n; ++r)
      ranks.push_back(std::move(MakeTextTrainLoader(corpus, kT, Sampling(4, n, r)).value()));
    auto reference = MakeTextTrainLoader(corpus, kT, Sampling(4));
    for (int step = 0; step < 10; ++step) {
      TextBatch want, part;
      ASSERT_TRUE((*reference)->Next(&want).ok());
      std::vector<int32_t> x, y;
      for (auto& rank : ranks) {
        ASSERT_TRUE(rank->Next(&part).ok());
        EXPECT_EQ(part.B, 4 / n);
        x.insert(x.end(), part.x.begin(), part.x.end());
        y.insert(y.end(), part.y.begin(), part.y.end());
      }
      EXPECT_EQ(x, want.x);
      EXPECT_EQ(y, want.y);
    }
  }
}

TEST(TextLoaders, RestoreContinuesIdentically) {
  auto corpus = RandomCorpus(3000);
  auto a = MakeTextTrainLoader(corpus, kT, Sampling(8));
  TextBatch ba, bb;
  for (int i = 0; i < 25; ++i) ASSERT_TRUE((*a)->Next(&ba).ok());  // crosses an epoch (20/epoch)
  LoaderState saved = (*a)->State();
  auto b = MakeTextTrainLoader(corpus, kT, Sampling(8));
  ASSERT_TRUE((*b)->Restore(saved).ok());
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE((*a)->Next(&ba).ok());
    ASSERT_TRUE((*b)->Next(&bb).ok());
    EXPECT_EQ(ba.x, bb.x);
    EXPECT_EQ(ba.y, bb.y);
  }
}

TEST(TextLoaders, ValidationWindowsAreFixedNonOverlappingAndCapped) {
  auto corpus = RandomCorpus(2000);  // 200 val bytes: (200-1)/16 = 12 windows
  ASSERT_EQ(ValWindowCount(200, kT), 12);
  auto all = MakeTextValLoader(corpus, kT, Sampling(5), 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ((*all)->StepsPerEpoch(), 2);  // 12 windows / 5, partial batch dropped
  TextBatch b;
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE((*all)->Next(&b).ok());
    for (int64_t row = 0; row < 5; ++row) {
      const int64_t start = (step * 5 + row) * kT;
      for (int64_t i = 0; i < kT; ++i) {
        ASSERT_EQ(b.x[row * kT + i], corpus->val()[start + i]);
        ASSERT_EQ(b.y[row * kT + i], corpus->val()[start + i + 1]);
      }
    }
  }
  ASSERT_TRUE((*all)->Next(&b).ok());  // wraps around to the same first batch
  EXPECT_EQ(b.x[0], corpus->val()[0]);
  auto capped = MakeTextValLoader(corpus, kT, Sampling(5), 1);
  EXPECT_EQ((*capped)->StepsPerEpoch(), 1);
  // Two ranks split the same windows.
  auto r1 = MakeTextValLoader(corpus, kT, Sampling(4, 2, 1), 0);
  ASSERT_TRUE((*r1)->Next(&b).ok());
  EXPECT_EQ(b.x[0], corpus->val()[2 * kT]);
}

TEST(TextLoaders, ErrorsReachTheCaller) {
  auto tiny = RandomCorpus(40);  // 36 train bytes < 2*16
  auto r = MakeTextTrainLoader(tiny, kT, Sampling(2));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too small for context 16"), std::string::npos) << r.status().message();
  auto corpus = RandomCorpus(2000);  // 12 validation windows
  SamplerOptions eval = Sampling(13);
  eval.batch_key = "eval.batch_size";
  r = MakeTextValLoader(corpus, kT, eval, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "eval.batch_size 13 is larger than the 12 validation windows of 16 bytes in corpus random");
  r = MakeTextTrainLoader(corpus, kT, Sampling(6, 4, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "train.batch_size 6 is not divisible by the world size 4 (try 4 or 8)");
}

}  // namespace
}  // namespace lockstep::data
