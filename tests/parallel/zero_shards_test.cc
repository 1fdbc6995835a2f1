// ZeRO helpers: shard ranges tile the buffer for every size and world (including more ranks
// than elements), the paper's byte accounting, and the parameter all-gather reassembles the
// buffer exactly from each rank's updated shard.
#include "lockstep/parallel/zero.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "lockstep/comm/threads/threads_world.h"

namespace lockstep::parallel {
namespace {

TEST(ZeroShards, TileTheBufferInOrder) {
  for (int64_t numel : {0, 1, 5, 7, 64, 1001}) {
    for (int world : {1, 2, 3, 4, 8}) {
      int64_t next = 0, largest = 0, smallest = numel;
      for (int r = 0; r < world; ++r) {
        optim::FlatRange s = ShardRange(numel, r, world);
        EXPECT_EQ(s.begin, next) << numel << " " << world << " " << r;
        EXPECT_GE(s.end, s.begin);
        next = s.end;
        largest = std::max(largest, s.size());
        smallest = std::min(smallest, s.size());
      }
      EXPECT_EQ(next, numel);
      EXPECT_EQ(largest, (numel + world - 1) / world);
    }
  }
}

TEST(ZeroShards, PaperAccountingForFp32Adam) {
  const int64_t psi = 1000;
  EXPECT_EQ(ExpectedZeroBytes(psi, 4, 0).total(), 16 * psi);
  EXPECT_EQ(ExpectedZeroBytes(psi, 4, 1).total(), 8 * psi + 8 * psi / 4);
  EXPECT_EQ(ExpectedZeroBytes(psi, 4, 2).total(), 4 * psi + 12 * psi / 4);
  EXPECT_EQ(ExpectedZeroBytes(psi, 4, 3).total(), 16 * psi / 4);
}

TEST(ShardedParamGather, EveryRankEndsWithEveryShard) {
  for (int world : {1, 2, 3, 4}) {
    for (int64_t numel : {1, 10, 4097}) {
      comm::ThreadsWorld threads_world(world);
      std::vector<std::vector<float>> bufs(world, std::vector<float>(static_cast<size_t>(numel), -1.0f));
      std::vector<std::thread> threads;
      for (int r = 0; r < world; ++r) {
        threads.emplace_back([&, r] {
          ShardedParamGather gather(threads_world.Rank(r), numel);
          optim::FlatRange mine = ShardRange(numel, r, world);
          for (int64_t i = mine.begin; i < mine.end; ++i) bufs[r][i] = static_cast<float>(i) * 0.5f;  // "updated"
          Status s = gather.Gather(bufs[r].data());
          EXPECT_TRUE(s.ok()) << s.message();
        });
      }
      for (auto& t : threads) t.join();
      for (int r = 0; r < world; ++r)
        for (int64_t i = 0; i < numel; ++i)
          ASSERT_EQ(bufs[r][i], static_cast<float>(i) * 0.5f) << world << " " << r << " " << i;
    }
  }
}

}  // namespace
}  // namespace lockstep::parallel
