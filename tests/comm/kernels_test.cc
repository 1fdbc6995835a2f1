// Reduction kernels, bf16 rounding, names and messages, chunk layout, and asynchronous
// progress (operations complete without anybody calling Wait).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "comm/comm_test_util.h"
#include "lockstep/comm/call_desc.h"
#include "lockstep/comm/reduce_kernels.h"
#include "lockstep/comm/threads/layout.h"

namespace lockstep::comm {
namespace {

using testing::RunRanks;

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly half way between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 is half way between 1+2^-7 (odd) and 1+2^-6: rounds up to even.
  EXPECT_EQ(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
  EXPECT_EQ(Bf16ToF32(F32ToBf16(-3.0f)), -3.0f);
  // The vector path agrees with the scalar one.
  std::vector<float> in(37);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 1.0f + static_cast<float>(i) * std::ldexp(1.0f, -9);
  in[5] = NAN;
  in[6] = INFINITY;
  std::vector<uint16_t> out(in.size());
  F32ToBf16(in.data(), out.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], F32ToBf16(in[i])) << i;
}

TEST(ReduceRange, AllTypesAndOpsInPlace) {
  const size_t n = 2500;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kI32, DType::kI64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
      const int world = 3;
      std::vector<std::vector<unsigned char>> bufs(world);
      std::vector<const void*> in(world);
      for (int r = 0; r < world; ++r) {
        bufs[r].resize(n * DTypeSize(dt));
        testing::FillTestValues(dt, bufs[r].data(), n, r, 0, 5);
        in[r] = bufs[r].data();
      }
      std::vector<unsigned char> want(n * DTypeSize(dt));
      testing::ExpectedReduction(dt, op, world, n, 0, 5, want.data());
      void* out = bufs[1].data();  // in place on input 1
      ReduceRange(dt, op, in.data(), world, &out, 1, 0, n, world);
      EXPECT_EQ(testing::DescribeMismatch(dt, out, want.data(), n), "") << DTypeName(dt) << " " << ReduceOpName(op);
    }
  }
}

TEST(Names, DescribeAndMessages) {
  EXPECT_STREQ(DTypeName(DType::kBF16), "bf16");
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  EXPECT_STREQ(OpKindName(OpKind::kReduceScatter), "reduce_scatter");
  CallDesc d;
  d.kind = OpKind::kReduce;
  d.count = 9;
  d.dtype = DType::kI32;
  d.op = ReduceOp::kMin;
  d.root = 2;
  EXPECT_EQ(Describe(d), "reduce(count=9, i32, min, root=2)");
  EXPECT_EQ(TimeoutMessage(3, d, 12, std::chrono::milliseconds(1000), {1, 2}),
            "rank 3: collective reduce #12 (count=9, dtype=i32) timed out after 1.00 s waiting "
            "for rank(s) 1, 2");
}

TEST(Layout, ChunksCoverAndAlign) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{17}, size_t{1000}, size_t{4099}}) {
    for (int n : {1, 2, 3, 8}) {
      size_t next = 0;
      for (int r = 0; r < n; ++r) {
        threads::Range c = threads::ChunkOf(count, n, r, 4);
        EXPECT_EQ(c.begin, next);
        if (c.begin < count) {
          EXPECT_EQ(c.begin % 16, 0u);
        }
        next = c.end;
      }
      EXPECT_EQ(next, count);
    }
  }
}

// Large and small operations complete while the caller only polls Done(): DDP issues
// allreduces during backward and waits for them later.
TEST(Progress, CompletesWithoutWait) {
  RunRanks(2, [](Communicator& c) {
    std::vector<float> big(1 << 18, 1.0f);
    float small = 2.0f;
    WorkHandle w1 = c.Allreduce(big.data(), big.data(), big.size(), DType::kF32, ReduceOp::kSum);
    WorkHandle w2 = c.Allreduce(&small, &small, 1, DType::kF32, ReduceOp::kSum);
    for (int i = 0; i < 5000 && !(w1->Done() && w2->Done()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(w1->Done());
    ASSERT_TRUE(w2->Done());
    EXPECT_TRUE(w2->Wait().ok());
    EXPECT_EQ(big[12345], 2.0f);
    EXPECT_EQ(small, 4.0f);
  });
}

// Many operations in flight, waited in reverse order, complete in issue order.
TEST(Progress, ManyInFlightWaitedInReverse) {
  RunRanks(4, [](Communicator& c) {
    std::vector<std::vector<int32_t>> bufs(20);
    std::vector<WorkHandle> works;
    for (int k = 0; k < 20; ++k) {
      bufs[k].assign(k % 2 ? 50000 : 3, c.rank() + k);
      works.push_back(c.Allreduce(bufs[k].data(), bufs[k].data(), bufs[k].size(), DType::kI32, ReduceOp::kSum));
    }
    for (int k = 19; k >= 0; --k) ASSERT_TRUE(works[k]->Wait().ok());
    for (int k = 0; k < 20; ++k) EXPECT_EQ(bufs[k].back(), 6 + 4 * k) << k;
  });
}

}  // namespace
}  // namespace lockstep::comm
