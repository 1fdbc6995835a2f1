// Split on the mpi backend: groups and rank order by (key, parent rank), color < 0, nested
// splits, and subgroups used concurrently (from different processes and, within one
// process, two subcommunicators with operations in flight at the same time).
#include <gtest/gtest.h>

#include <vector>

#include "comm/mpi_test_util.h"

namespace lockstep::comm {
namespace {

// Sum over the members of a group of (parent rank + 1) * (k + 1), elementwise with k.
void StartGroupSum(Communicator& g, int parent_rank, size_t count, WorkHandle* pending, std::vector<float>* buf) {
  buf->assign(count, 0.0f);
  for (size_t k = 0; k < count; ++k) (*buf)[k] = static_cast<float>((parent_rank + 1) * (k % 9 + 1));
  *pending = g.Allreduce(buf->data(), buf->data(), count, DType::kF32, ReduceOp::kSum);
}

float ExpectedGroupSum(const std::vector<int>& members, size_t k) {
  float s = 0;
  for (int m : members) s += static_cast<float>((m + 1) * (k % 9 + 1));
  return s;
}

void CheckSplits() {
  Communicator& w = testing::World();
  const int n = w.size(), r = w.rank();
  // Halves (ranks < n/2 and the rest), ordered by descending parent rank via the key.
  const int half_color = r < n / 2 ? 0 : 1;
  auto half = w.Split(half_color, -r);
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  std::vector<int> half_members;
  for (int p = n - 1; p >= 0; --p) {
    if ((p < n / 2 ? 0 : 1) == half_color) half_members.push_back(p);
  }
  ASSERT_NE(*half, nullptr);
  EXPECT_EQ((*half)->size(), static_cast<int>(half_members.size()));
  for (size_t i = 0; i < half_members.size(); ++i) {
    if (half_members[i] == r) {
      EXPECT_EQ((*half)->rank(), static_cast<int>(i));
    }
  }
  // Parity groups; rank n-1 opts out with color -1 when n > 2.
  const bool out = n > 2 && r == n - 1;
  auto parity = w.Split(out ? -1 : r % 2, r);
  ASSERT_TRUE(parity.ok()) << parity.status().ToString();
  std::vector<int> parity_members;
  for (int p = 0; p < n; ++p) {
    if (!(n > 2 && p == n - 1) && p % 2 == r % 2) parity_members.push_back(p);
  }
  if (out) {
    EXPECT_EQ(*parity, nullptr);
  } else {
    ASSERT_NE(*parity, nullptr);
    EXPECT_EQ((*parity)->size(), static_cast<int>(parity_members.size()));
  }

  // Both subcommunicators busy at once, plus the parent, several rounds.
  for (int round = 0; round < 5; ++round) {
    const size_t count = round % 2 ? 100003 : 17;
    WorkHandle wh, wp, ww;
    std::vector<float> bh, bp, bw(count, 1.0f);
    StartGroupSum(**half, r, count, &wh, &bh);
    if (!out) StartGroupSum(**parity, r, count, &wp, &bp);
    ww = w.Allreduce(bw.data(), bw.data(), count, DType::kF32, ReduceOp::kSum);
    ASSERT_TRUE(wh->Wait().ok());
    if (!out) {
      ASSERT_TRUE(wp->Wait().ok());
    }
    ASSERT_TRUE(ww->Wait().ok());
    for (size_t k = 0; k < count; k += 101) {
      ASSERT_EQ(bh[k], ExpectedGroupSum(half_members, k)) << "half, element " << k;
      if (!out) {
        ASSERT_EQ(bp[k], ExpectedGroupSum(parity_members, k)) << "parity, element " << k;
      }
      ASSERT_EQ(bw[k], static_cast<float>(n));
    }
  }

  // Nested: split the half again into singletons; a world of one works on its own.
  auto single = (*half)->Split((*half)->rank(), 0);
  ASSERT_TRUE(single.ok());
  ASSERT_NE(*single, nullptr);
  EXPECT_EQ((*single)->size(), 1);
  float v[3] = {1, 2, 3};
  ASSERT_TRUE((*single)->Allreduce(v, v, 3, DType::kF32, ReduceOp::kAvg)->Wait().ok());
  EXPECT_EQ(v[2], 3.0f);
  ASSERT_TRUE(w.Barrier()->Wait().ok());
}

TEST(MpiSplit, Np2) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(2);
  CheckSplits();
}

TEST(MpiSplit, Np3) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(3);
  CheckSplits();
}

TEST(MpiSplit, Np4) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(4);
  CheckSplits();
}

}  // namespace
}  // namespace lockstep::comm
