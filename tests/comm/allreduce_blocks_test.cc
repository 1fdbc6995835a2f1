// Large threads allreduce: the vector is cut into blocks that ranks claim one at a time, and
// outputs at least StreamOutputs() large are written with streaming stores. Checked exactly
// for many blocks, sizes that end mid-block, buffers at odd offsets (alike on every rank, or
// different per rank so that streaming is impossible), in place, every op, several world
// sizes, and many collectives in a row (the claim counters are reused by parity); the claim
// loop alone with a rank that never turns up.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_test_util.h"
#include "lockstep/comm/reduce_kernels.h"
#include "lockstep/comm/threads/group.h"
#include "lockstep/comm/threads/layout.h"

namespace lockstep::comm {
namespace {

using testing::DescribeMismatch;
using testing::ExpectedReduction;
using testing::FillTestValues;
using testing::RunRanks;

// Runs one allreduce of `n` elements whose buffers start `offset` bytes into their
// allocation (a multiple of the element size).
void CheckAllreduceAt(Communicator& c, DType dt, ReduceOp op, size_t n, size_t offset, bool in_place, uint64_t salt) {
  const size_t es = DTypeSize(dt);
  std::vector<unsigned char> send_alloc(n * es + 64), recv_alloc(n * es + 64, 0xA5);
  unsigned char* send = send_alloc.data() + offset;
  unsigned char* recv = in_place ? send : recv_alloc.data() + offset;
  std::vector<unsigned char> want(n * es);
  FillTestValues(dt, send, n, c.rank(), 0, salt);
  ExpectedReduction(dt, op, c.size(), n, 0, salt, want.data());
  Status s = c.Allreduce(send, recv, n, dt, op)->Wait();
  const std::string where = "world=" + std::to_string(c.size()) + " rank=" + std::to_string(c.rank()) + " " +
                            DTypeName(dt) + " " + ReduceOpName(op) + " n=" + std::to_string(n) +
                            " offset=" + std::to_string(offset) + (in_place ? " in-place" : "");
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  EXPECT_EQ(DescribeMismatch(dt, recv, want.data(), n), "") << where;
}

class AllreduceBlocksTest : public ::testing::TestWithParam<int> {};

// Many blocks, below the streaming size: every op and dtype, sizes around block edges.
TEST_P(AllreduceBlocksTest, ManyBlocksEveryOpAndType) {
  RunRanks(GetParam(), [](Communicator& c) {
    uint64_t salt = 1;
    for (DType dt : {DType::kF32, DType::kBF16, DType::kI32, DType::kI64}) {
      const size_t block = threads::kClaimBytes / DTypeSize(dt);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
        CheckAllreduceAt(c, dt, op, 3 * block + 17, 0, false, salt++);
        CheckAllreduceAt(c, dt, op, 3 * block + 17, 8 * DTypeSize(dt), true, salt++);
      }
      CheckAllreduceAt(c, dt, ReduceOp::kSum, 4 * block, 0, false, salt++);
    }
  });
}

// Above the streaming size: aligned, odd offsets alike on every rank (the streaming path
// with an unaligned head), and offsets that differ by rank (outputs cannot all be aligned,
// so the kernel must fall back to ordinary stores).
TEST_P(AllreduceBlocksTest, StreamedSizesAtOddOffsets) {
  RunRanks(GetParam(), [](Communicator& c) {
    const size_t n = (size_t{9} << 20) / 4 + 1001;  // > 8 MiB, not a whole number of blocks
    ASSERT_TRUE(StreamOutputs(n * 4));
    CheckAllreduceAt(c, DType::kF32, ReduceOp::kSum, n, 0, false, 100);
    CheckAllreduceAt(c, DType::kF32, ReduceOp::kMax, n, 12, true, 101);
    CheckAllreduceAt(c, DType::kF32, ReduceOp::kAvg, n, 4 + 8 * static_cast<size_t>(c.rank()), false, 102);
  });
}

// Back-to-back large collectives with no wait in between reuse both claim counters many
// times; a barrier and a small allreduce in between change the parity pattern.
TEST_P(AllreduceBlocksTest, ManyInFlightReuseTheClaimCounters) {
  RunRanks(GetParam(), [](Communicator& c) {
    const size_t n = 2 * threads::kClaimBytes / 4 + 5;
    std::vector<std::vector<float>> bufs(9, std::vector<float>(n));
    std::vector<WorkHandle> works;
    float one = 1.0f;
    for (size_t k = 0; k < bufs.size(); ++k) {
      for (size_t i = 0; i < n; ++i) bufs[k][i] = static_cast<float>(c.rank() + k + i % 5);
      works.push_back(c.Allreduce(bufs[k].data(), bufs[k].data(), n, DType::kF32, ReduceOp::kSum));
      if (k == 3) works.push_back(c.Barrier());
      if (k == 5) works.push_back(c.Allreduce(&one, &one, 1, DType::kF32, ReduceOp::kSum));
    }
    for (auto& w : works) ASSERT_TRUE(w->Wait().ok());
    const int world = c.size();
    EXPECT_EQ(one, static_cast<float>(world));
    for (size_t k = 0; k < bufs.size(); ++k) {
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) {
        const float want = static_cast<float>(world * (world - 1) / 2 + world * (k + i % 5));
        bad += bufs[k][i] != want;
      }
      EXPECT_EQ(bad, 0u) << "collective " << k << " rank " << c.rank();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllreduceBlocksTest, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "world" + std::to_string(info.param);
                         });

// A rank that never turns up (descheduled for the whole collective) is covered: the others
// claim its run too. Concurrent claimers split the blocks exactly once. Both parities and
// the per-rank reset are exercised over several collectives.
TEST(ClaimedBlocks, LateRankIsCoveredAndEveryBlockRunsOnce) {
  for (int world : {1, 2, 3, 5}) {
    threads::Group group(world, false);
    for (uint64_t seq = 1; seq <= 4; ++seq) {
      for (int r = 0; r < world; ++r) group.claims(seq, r).store(0);
      const size_t blocks = 37 + seq;
      std::vector<std::atomic<int>> runs(blocks);
      // Rank world-1 is "late": only the others claim, concurrently.
      std::vector<std::thread> ranks;
      for (int r = 0; r + 1 < std::max(world, 2); ++r) {
        ranks.emplace_back([&, r] { group.ForClaimedBlocks(seq, r % world, blocks, [&](size_t j) { runs[j]++; }); });
      }
      for (auto& t : ranks) t.join();
      // The late rank arrives after everything was taken: it must find nothing left.
      int late = 0;
      group.ForClaimedBlocks(seq, world - 1, blocks, [&](size_t j) { runs[j]++, late++; });
      EXPECT_EQ(late, 0) << "world " << world << " seq " << seq;
      for (size_t j = 0; j < blocks; ++j) {
        ASSERT_EQ(runs[j].load(), 1) << "world " << world << " seq " << seq << " block " << j;
      }
    }
  }
}

// The block plan covers [0, count) exactly once, in order, and every boundary after the
// first lands on a 64-byte boundary of the base address.
TEST(BlockPlan, CoversOnceWithAlignedBoundaries) {
  alignas(64) static unsigned char base[256];
  for (size_t es : {size_t{2}, size_t{4}, size_t{8}}) {
    for (size_t shift : {size_t{0}, es, 3 * es, 40 - 40 % es}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{100}, size_t{1000}, size_t{4099}}) {
        const threads::BlockPlan plan = threads::PlanBlocks(count, es, base + shift, 256);
        size_t next = 0;
        for (size_t j = 0; j < plan.blocks; ++j) {
          const threads::Range r = plan.Block(j);
          ASSERT_EQ(r.begin, next) << es << " " << shift << " " << count << " block " << j;
          ASSERT_GT(r.end, r.begin) << es << " " << shift << " " << count << " block " << j;
          if (j > 0) {
            EXPECT_EQ((shift + r.begin * es) % 64, 0u) << es << " " << shift << " " << j;
          }
          next = r.end;
        }
        EXPECT_EQ(next, count) << es << " " << shift;
        EXPECT_TRUE(plan.Block(plan.blocks).begin >= count || count == 0);
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::comm
