#include "lockstep/data/image_loaders.h"

#include <gtest/gtest.h>

#include <set>

#include "data/data_test_util.h"

namespace lockstep::data {
namespace {

// 10 images of 2x2; every pixel of image i is i, label i % 10 -> an image identifies itself.
std::shared_ptr<const IdxDataset> SmallDataset() {
  testing::TempDir dir;
  std::vector<uint8_t> pixels, labels;
  for (uint8_t i = 0; i < 10; ++i) {
    for (int k = 0; k < 4; ++k) pixels.push_back(i);
    labels.push_back(i);
  }
  testing::WriteGzip(dir / "i.gz", testing::IdxBytes(kIdxImagesMagic, {10, 2, 2}, pixels));
  testing::WriteGzip(dir / "l.gz", testing::IdxBytes(kIdxLabelsMagic, {10}, labels));
  auto d = IdxDataset::Load(dir / "i.gz", dir / "l.gz");
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return std::make_shared<const IdxDataset>(std::move(d).value());
}

SamplerOptions Sampling(int64_t g, int64_t n, int64_t r, FinalBatch fb = FinalBatch::kDrop) {
  SamplerOptions o;
  o.global_batch = g;
  o.world_size = n;
  o.rank = r;
  o.seed = 3;
  o.final_batch = fb;
  return o;
}

TEST(ImageLoaders, TrainBatchesMatchLabelsAndSplitAcrossRanks) {
  auto data = SmallDataset();
  auto one = MakeImageTrainLoader(data, Sampling(4, 1, 0, FinalBatch::kPad));
  auto r0 = MakeImageTrainLoader(data, Sampling(4, 2, 0, FinalBatch::kPad));
  auto r1 = MakeImageTrainLoader(data, Sampling(4, 2, 1, FinalBatch::kPad));
  ASSERT_TRUE(one.ok() && r0.ok() && r1.ok());
  EXPECT_EQ((*one)->StepsPerEpoch(), 3);
  std::multiset<int32_t> epoch_labels;
  for (int step = 0; step < 3; ++step) {
    ImageBatch all, a, b;
    ASSERT_TRUE((*one)->Next(&all).ok());
    ASSERT_TRUE((*r0)->Next(&a).ok());
    ASSERT_TRUE((*r1)->Next(&b).ok());
    ASSERT_EQ(all.B, 4);
    ASSERT_EQ(a.B, 2);
    EXPECT_EQ(all.H, 2);
    EXPECT_EQ(all.valid, 4);
    for (int64_t row = 0; row < 4; ++row) {
      EXPECT_EQ(all.images[row * 4 + 3], static_cast<float>(all.labels[row]) / 255.0f);
      epoch_labels.insert(all.labels[row]);
    }
    EXPECT_EQ(all.labels[0], a.labels[0]);
    EXPECT_EQ(all.labels[1], a.labels[1]);
    EXPECT_EQ(all.labels[2], b.labels[0]);
    EXPECT_EQ(all.labels[3], b.labels[1]);
    EXPECT_EQ(std::vector<float>(all.images.begin() + 8, all.images.end()), b.images);
  }
  // 12 slots: all 10 images once, plus 2 repeated from the start of the permutation.
  EXPECT_EQ(std::set<int32_t>(epoch_labels.begin(), epoch_labels.end()).size(), 10u);
  EXPECT_EQ(epoch_labels.size(), 12u);
}

TEST(ImageLoaders, EvalCoversEveryImageOnceWithMaskedTail) {
  auto data = SmallDataset();
  std::multiset<int32_t> seen;
  int64_t valid = 0;
  for (int64_t r = 0; r < 2; ++r) {
    auto loader = MakeImageEvalLoader(data, Sampling(4, 2, r));
    ASSERT_TRUE(loader.ok());
    ASSERT_EQ((*loader)->StepsPerEpoch(), 3);
    for (int step = 0; step < 3; ++step) {
      ImageBatch b;
      ASSERT_TRUE((*loader)->Next(&b).ok());
      for (int64_t row = 0; row < b.B; ++row) {
        if (row < b.valid) {
          seen.insert(b.labels[row]);
        } else {  // padding is a suffix of the rank's rows
          EXPECT_EQ(b.labels[row], kIgnoreTarget);
          EXPECT_EQ(b.images[row * 4], 0.0f);
        }
      }
      valid += b.valid;
    }
  }
  EXPECT_EQ(valid, 10);
  EXPECT_EQ(seen, (std::multiset<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(ImageLoaders, RestoreContinuesIdentically) {
  auto data = SmallDataset();
  auto a = MakeImageTrainLoader(data, Sampling(2, 1, 0));
  ImageBatch ba, bb;
  for (int i = 0; i < 7; ++i) ASSERT_TRUE((*a)->Next(&ba).ok());
  auto b = MakeImageTrainLoader(data, Sampling(2, 1, 0));
  ASSERT_TRUE((*b)->Restore((*a)->State()).ok());
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE((*a)->Next(&ba).ok());
    ASSERT_TRUE((*b)->Next(&bb).ok());
    EXPECT_EQ(ba.labels, bb.labels);
  }
}

}  // namespace
}  // namespace lockstep::data
