// CountingCommunicator: the bytes counted are the ring algorithm's (counting_communicator.h),
// the results are the wrapped backend's, and Split's children count into the same counter.
#include "lockstep/comm/counting_communicator.h"

#include <gtest/gtest.h>

#include <vector>

#include "comm_test_util.h"

namespace lockstep::comm {
namespace {

std::shared_ptr<Communicator> Unowned(Communicator& c) { return std::shared_ptr<Communicator>(std::shared_ptr<Communicator>{}, &c); }

TEST(CountingCommunicator, CountsTheRingAlgorithmsBytesAndForwardsTheResults) {
  testing::RunRanks(4, [](Communicator& raw) {
    auto counter = std::make_shared<ByteCounter>(0);
    CountingCommunicator c(Unowned(raw), counter);
    std::vector<float> v(1000, static_cast<float>(raw.rank() + 1));
    ASSERT_TRUE(c.Allreduce(v.data(), v.data(), v.size(), DType::kF32, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(v[999], 10.0f);  // 1 + 2 + 3 + 4: the backend did the work
    EXPECT_EQ(counter->load(), 2 * 3 * 4000 / 4);
    counter->store(0);
    std::vector<uint16_t> half(64);
    ASSERT_TRUE(c.Allreduce(half.data(), half.data(), half.size(), DType::kBF16, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(counter->load(), 2 * 3 * 128 / 4);
    counter->store(0);
    std::vector<float> all(4 * 10);
    ASSERT_TRUE(c.ReduceScatter(all.data(), all.data() + 10 * raw.rank(), 10, DType::kF32, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(counter->load(), 3 * 40);
    counter->store(0);
    ASSERT_TRUE(c.AllGather(all.data() + 10 * raw.rank(), all.data(), 10, DType::kF32)->Wait().ok());
    EXPECT_EQ(counter->load(), 3 * 40);
    counter->store(0);
    ASSERT_TRUE(c.Barrier()->Wait().ok());
    EXPECT_EQ(counter->load(), 0);
    if (raw.rank() < 2) {  // a send counts where it leaves, not where it lands
      int64_t x = 7;
      const int peer = 1 - raw.rank();
      if (raw.rank() == 0) {
        ASSERT_TRUE(c.Send(&x, 1, DType::kI64, peer, 3)->Wait().ok());
      } else {
        ASSERT_TRUE(c.Recv(&x, 1, DType::kI64, peer, 3)->Wait().ok());
      }
      EXPECT_EQ(counter->load(), raw.rank() == 0 ? 8 : 0);
    }
  });
}

TEST(CountingCommunicator, SplitGroupsCountIntoTheParentsCounterAndALoneRankSendsNothing) {
  testing::RunRanks(4, [](Communicator& raw) {
    auto counter = std::make_shared<ByteCounter>(0);
    CountingCommunicator c(Unowned(raw), counter);
    auto pair = c.Split(raw.rank() / 2, raw.rank());
    ASSERT_TRUE(pair.ok());
    auto alone = c.Split(raw.rank(), 0);
    ASSERT_TRUE(alone.ok());
    std::vector<float> v(100, 1.0f);
    ASSERT_TRUE((*pair)->Allreduce(v.data(), v.data(), v.size(), DType::kF32, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(v[0], 2.0f);
    EXPECT_EQ(counter->load(), 2 * 1 * 400 / 2);
    ASSERT_TRUE((*alone)->Allreduce(v.data(), v.data(), v.size(), DType::kF32, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(counter->load(), 400);  // unchanged
  });
}

}  // namespace
}  // namespace lockstep::comm
