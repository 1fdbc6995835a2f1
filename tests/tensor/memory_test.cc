#include "lockstep/tensor/memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "lockstep/tensor/tensor.h"

namespace lockstep::tensor {
namespace {

TEST(MemoryTracker, CountsCurrentAndPeakPerTag) {
  MemoryTracker t;
  ScopedTracker scope(&t);
  void* a = AlignedAlloc(1000, MemoryTag::kParameter);
  void* b = AlignedAlloc(500, MemoryTag::kActivation);
  EXPECT_EQ(t.Current(MemoryTag::kParameter), 1000);
  EXPECT_EQ(t.Current(MemoryTag::kActivation), 500);
  EXPECT_EQ(t.Current(MemoryTag::kGradient), 0);
  EXPECT_EQ(t.CurrentTotal(), 1500);
  EXPECT_EQ(t.PeakTotal(), 1500);
  AlignedFree(b, 500, MemoryTag::kActivation);
  void* c = AlignedAlloc(200, MemoryTag::kActivation);
  EXPECT_EQ(t.Current(MemoryTag::kActivation), 200);
  EXPECT_EQ(t.Peak(MemoryTag::kActivation), 500);
  EXPECT_EQ(t.PeakTotal(), 1500);
  t.ResetPeak();
  EXPECT_EQ(t.Peak(MemoryTag::kActivation), 200);
  EXPECT_EQ(t.PeakTotal(), 1200);
  AlignedFree(a, 1000, MemoryTag::kParameter);
  AlignedFree(c, 200, MemoryTag::kActivation);
  EXPECT_EQ(t.CurrentTotal(), 0);
  EXPECT_EQ(t.PeakTotal(), 1200);
  EXPECT_EQ(t.NumAllocations(), 3);
}

TEST(MemoryTracker, BlocksAre64ByteAligned) {
  MemoryTracker t;
  ScopedTracker scope(&t);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}}) {
    void* p = AlignedAlloc(bytes, MemoryTag::kOther);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    AlignedFree(p, bytes, MemoryTag::kOther);
  }
  EXPECT_EQ(t.CurrentTotal(), 0);
}

TEST(MemoryTracker, EachThreadHasItsOwnTrackerAndFreeGoesToTheAllocatingOne) {
  MemoryTracker rank0, rank1;
  void* from_rank1 = nullptr;
  std::thread th([&] {
    SetCurrentTracker(&rank1);
    EXPECT_EQ(CurrentTracker(), &rank1);
    from_rank1 = AlignedAlloc(4096, MemoryTag::kGradient);
  });
  th.join();
  {
    ScopedTracker scope(&rank0);
    EXPECT_EQ(CurrentTracker(), &rank0);
    EXPECT_EQ(rank1.Current(MemoryTag::kGradient), 4096);
    // Freed on this thread (rank0 installed), but counted back into rank1.
    AlignedFree(from_rank1, 4096, MemoryTag::kGradient);
    EXPECT_EQ(rank1.Current(MemoryTag::kGradient), 0);
    EXPECT_EQ(rank0.CurrentTotal(), 0);
    EXPECT_EQ(rank1.Peak(MemoryTag::kGradient), 4096);
  }
  EXPECT_EQ(CurrentTracker(), DefaultTracker());
}

TEST(MemoryTracker, TensorStorageIsTrackedUntilTheLastViewDies) {
  MemoryTracker t;
  ScopedTracker scope(&t);
  {
    Tensor a = Tensor::Zeros({16, 16}, DType::kF32, MemoryTag::kOptimizer);
    EXPECT_EQ(t.Current(MemoryTag::kOptimizer), 16 * 16 * 4);
    Tensor view = a.Slice(0, 2, 4);
    a = Tensor();
    EXPECT_EQ(t.Current(MemoryTag::kOptimizer), 16 * 16 * 4);  // view keeps storage alive
  }
  EXPECT_EQ(t.Current(MemoryTag::kOptimizer), 0);
  EXPECT_EQ(t.Peak(MemoryTag::kOptimizer), 1024);
}

TEST(MemoryTracker, LimitMakesAllocationFail) {
  MemoryTracker t;
  ScopedTracker scope(&t);
  t.SetLimit(10000);
  void* a = AlignedAlloc(8000, MemoryTag::kActivation);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(AlignedAlloc(4000, MemoryTag::kActivation), nullptr);
  EXPECT_EQ(t.CurrentTotal(), 8000);  // the failed attempt counts nothing
  EXPECT_EQ(t.PeakTotal(), 8000);
  Result<Tensor> r = Tensor::TryEmpty({1000}, DType::kF32, MemoryTag::kActivation);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("limit 10000"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(Storage::Allocate(4000, MemoryTag::kOther), nullptr);
  AlignedFree(a, 8000, MemoryTag::kActivation);
  Result<Tensor> ok = Tensor::TryEmpty({1000}, DType::kF32, MemoryTag::kActivation);
  EXPECT_TRUE(ok.ok());
}

TEST(MemoryTrackerDeathTest, FreeWithWrongSizeAborts) {
  EXPECT_DEATH(
      {
        void* p = AlignedAlloc(128, MemoryTag::kOther);
        AlignedFree(p, 64, MemoryTag::kOther);
      },
      "AlignedFree\\(64");
}

// A configured limit is user input (--mem-limit): one line and exit status 2, not an abort.
TEST(MemoryTrackerDeathTest, EmptyBeyondLimitExitsWithUsageStatusAndMessage) {
  EXPECT_EXIT(
      {
        MemoryTracker t;
        t.SetLimit(100);
        SetCurrentTracker(&t);
        Tensor::Empty({1000});
      },
      ::testing::ExitedWithCode(2), "out of memory under --mem-limit 0.0 MiB: a tensor \\[1000\\] needs 0.0 MiB more");
}

}  // namespace
}  // namespace lockstep::tensor
