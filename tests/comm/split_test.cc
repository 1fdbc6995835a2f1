// Split: membership and ordering, color < 0, nested splits, and subgroups that run different
// collectives at the same time as each other and as the parent.
#include <gtest/gtest.h>

#include <vector>

#include "comm/comm_test_util.h"

namespace lockstep::comm {
namespace {

using testing::RunRanks;

TEST(Split, EvenOddGroupsOrderedByKey) {
  RunRanks(8, [](Communicator& c) {
    // Key -rank reverses the order inside each group.
    auto sub = c.Split(c.rank() % 2, -c.rank());
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
    ASSERT_NE(*sub, nullptr);
    EXPECT_EQ((*sub)->size(), 4);
    EXPECT_EQ((*sub)->rank(), 3 - c.rank() / 2);
    EXPECT_STREQ((*sub)->backend_name(), "threads");
  });
}

TEST(Split, TiesOrderedByParentRankAndNegativeColorIsNull) {
  RunRanks(5, [](Communicator& c) {
    int color = c.rank() == 2 ? -1 : 0;
    auto sub = c.Split(color, 0);
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
    if (c.rank() == 2) {
      EXPECT_EQ(*sub, nullptr);
      return;
    }
    ASSERT_NE(*sub, nullptr);
    EXPECT_EQ((*sub)->size(), 4);
    EXPECT_EQ((*sub)->rank(), c.rank() < 2 ? c.rank() : c.rank() - 1);
  });
}

// Even and odd groups run different numbers of differently sized allreduces concurrently,
// interleaved with parent collectives and a nested split.
TEST(Split, ConcurrentSubgroupCollectives) {
  RunRanks(8, [](Communicator& c) {
    const bool even = c.rank() % 2 == 0;
    auto sub_or = c.Split(even ? 0 : 1, c.rank());
    ASSERT_TRUE(sub_or.ok());
    std::shared_ptr<Communicator> sub = *sub_or;
    const size_t count = even ? 1000 : 70000;
    const int rounds = even ? 30 : 7;
    for (int round = 0; round < rounds; ++round) {
      std::vector<int32_t> buf(count);
      for (size_t i = 0; i < count; ++i) buf[i] = c.rank() * 1000 + round + static_cast<int>(i % 3);
      WorkHandle w = sub->Allreduce(buf.data(), buf.data(), count, DType::kI32, even ? ReduceOp::kSum : ReduceOp::kMax);
      ASSERT_TRUE(w->Wait().ok());
      // Members: even = {0,2,4,6}, odd = {1,3,5,7}.
      for (size_t i = 0; i < count; i += 997) {
        int32_t want = even ? (0 + 2 + 4 + 6) * 1000 + 4 * (round + static_cast<int>(i % 3))
                            : 7 * 1000 + round + static_cast<int>(i % 3);
        ASSERT_EQ(buf[i], want) << "round " << round << " i " << i;
      }
    }
    // Parent still works, and the subgroups can split again.
    int64_t x = c.rank();
    ASSERT_TRUE(c.Allreduce(&x, &x, 1, DType::kI64, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(x, 28);
    auto nested = sub->Split(sub->rank() / 2, 0);
    ASSERT_TRUE(nested.ok());
    EXPECT_EQ((*nested)->size(), 2);
    float f = 1.0f;
    ASSERT_TRUE((*nested)->Allreduce(&f, &f, 1, DType::kF32, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(f, 2.0f);
  });
}

// Rank 0 waits on the parent op before the child op, rank 1 the other way round: only true
// asynchronous progress (not "run when waited") completes this.
TEST(Split, CrossCommunicatorWaitOrder) {
  RunRanks(2, [](Communicator& c) {
    auto child = *c.Split(0, c.rank());
    float a = 1.0f, b = 2.0f;
    WorkHandle on_child = child->Allreduce(&a, &a, 1, DType::kF32, ReduceOp::kSum);
    WorkHandle on_parent = c.Allreduce(&b, &b, 1, DType::kF32, ReduceOp::kSum);
    if (c.rank() == 0) {
      ASSERT_TRUE(on_parent->Wait().ok());
      ASSERT_TRUE(on_child->Wait().ok());
    } else {
      ASSERT_TRUE(on_child->Wait().ok());
      ASSERT_TRUE(on_parent->Wait().ok());
    }
    EXPECT_EQ(a, 2.0f);
    EXPECT_EQ(b, 4.0f);
  });
}

}  // namespace
}  // namespace lockstep::comm
