// SourceLoader: any DataSource through the DistributedSampler — each rank's rows are its
// slice of the global batch, every field of the layout is filled, masked slots become zero
// inputs and ignored targets, and a source that breaks its layout's ranges is one error.
#include "lockstep/data/source_loader.h"

#include <gtest/gtest.h>

namespace lockstep::data {
namespace {

// Sample i: tokens {i % 7, ...}, features {i, -i}, label i % 3, value 2i.
class Counting : public DataSource {
 public:
  explicit Counting(int64_t n, int32_t bad_label_at = -1) : n_(n), bad_(bad_label_at) {}
  int64_t size() const override { return n_; }
  SampleLayout layout() const override { return {.seq = 2, .vocab = 7, .features = 2, .classes = 3, .values = 1}; }
  Status Read(const SampleKey& key, const SampleSlot& out) const override {
    const int64_t i = key.index;
    out.tokens[0] = out.tokens[1] = static_cast<int32_t>(i % 7);
    out.targets[0] = out.targets[1] = static_cast<int32_t>((i + 1) % 7);
    out.features[0] = static_cast<float>(i);
    out.features[1] = -static_cast<float>(i);
    *out.label = i == bad_ ? 3 : static_cast<int32_t>(i % 3);
    out.values[0] = 2.0f * static_cast<float>(i);
    return Status::Ok();
  }

 private:
  int64_t n_;
  int64_t bad_;
};

SamplerOptions Sampling(int64_t global, int64_t world, int64_t rank, bool shuffle, FinalBatch fb) {
  SamplerOptions o;
  o.global_batch = global;
  o.world_size = world;
  o.rank = rank;
  o.seed = 5;
  o.shuffle = shuffle;
  o.final_batch = fb;
  return o;
}

TEST(SourceLoader, RanksReadTheirSliceOfTheGlobalBatchInEveryField) {
  auto source = std::make_shared<Counting>(10);
  auto all = MakeSourceLoader(source, Sampling(4, 1, 0, true, FinalBatch::kDrop));
  auto r1 = MakeSourceLoader(source, Sampling(4, 2, 1, true, FinalBatch::kDrop));
  ASSERT_TRUE(all.ok() && r1.ok());
  EXPECT_EQ((*all)->StepsPerEpoch(), 2);
  Batch a, b;
  ASSERT_TRUE((*all)->Next(&a).ok());
  ASSERT_TRUE((*r1)->Next(&b).ok());
  ASSERT_EQ(a.B, 4);
  ASSERT_EQ(b.B, 2);
  EXPECT_EQ(b.valid, 2);
  for (int64_t row = 0; row < 2; ++row) {
    const int64_t i = static_cast<int64_t>(a.features[(2 + row) * 2]);  // rank 1 holds rows 2, 3
    EXPECT_EQ(b.features[row * 2], static_cast<float>(i));
    EXPECT_EQ(b.features[row * 2 + 1], -static_cast<float>(i));
    EXPECT_EQ(b.labels[row], i % 3);
    EXPECT_EQ(b.values[row], 2.0f * static_cast<float>(i));
    EXPECT_EQ(b.tokens[row * 2 + 1], i % 7);
    EXPECT_EQ(b.targets[row * 2], (i + 1) % 7);
  }
}

TEST(SourceLoader, MaskedSlotsAreZeroInputsAndIgnoredTargetsAtTheEnd) {
  // 10 samples in batches of 4 on 2 ranks: the third batch holds samples 8, 9 and two masks,
  // which fall on rank 1.
  auto source = std::make_shared<Counting>(10);
  auto r0 = MakeSourceLoader(source, Sampling(4, 2, 0, false, FinalBatch::kMask));
  auto r1 = MakeSourceLoader(source, Sampling(4, 2, 1, false, FinalBatch::kMask));
  ASSERT_TRUE(r0.ok() && r1.ok());
  Batch a, b;
  for (int k = 0; k < 3; ++k) ASSERT_TRUE((*r0)->Next(&a).ok() && (*r1)->Next(&b).ok());
  EXPECT_EQ(a.valid, 2);
  EXPECT_EQ(a.features[0], 8.0f);
  EXPECT_EQ(b.valid, 0);
  EXPECT_EQ(b.labels[0], kIgnoreTarget);
  EXPECT_EQ(b.targets[1], kIgnoreTarget);
  EXPECT_EQ(b.features[3], 0.0f);
  EXPECT_EQ(b.values[1], 0.0f);
}

TEST(SourceLoader, ALabelOutsideTheLayoutIsAnErrorNamingTheSample) {
  auto loader =
      MakeSourceLoader(std::make_shared<Counting>(4, /*bad_label_at=*/2), Sampling(4, 1, 0, false, FinalBatch::kDrop));
  ASSERT_TRUE(loader.ok());
  Batch b;
  Status s = (*loader)->Next(&b);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sample 2 has label 3, outside [0, 3)"), std::string::npos) << s.message();
}

class Empty : public DataSource {
 public:
  int64_t size() const override { return 3; }
  SampleLayout layout() const override { return {}; }
  Status Read(const SampleKey&, const SampleSlot&) const override { return Status::Ok(); }
};

TEST(SourceLoader, ASourceMustDeclareItsSamples) {
  auto loader = MakeSourceLoader(std::make_shared<Empty>(), Sampling(1, 1, 0, false, FinalBatch::kDrop));
  ASSERT_FALSE(loader.ok());
  EXPECT_NE(loader.status().message().find("layout must declare"), std::string::npos);
  EXPECT_FALSE(MakeSourceLoader(nullptr, Sampling(1, 1, 0, false, FinalBatch::kDrop)).ok());
}

}  // namespace
}  // namespace lockstep::data
