// Every collective x dtype x world size x size (incl. 0, 1, primes and sizes not divisible by
// the world size) against exactly computed results, in place and out of place.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/comm_test_util.h"

namespace lockstep::comm {
namespace {

using testing::DescribeMismatch;
using testing::ExpectedReduction;
using testing::FillTestValues;
using testing::PoisonedBuffer;
using testing::RunRanks;

using Bytes = std::vector<unsigned char>;

const DType kAllTypes[] = {DType::kF32, DType::kBF16, DType::kI32, DType::kI64, DType::kU8};
const ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};

std::vector<size_t> Sizes(int world) { return {0, 1, 7, 13, 1000, 4099, static_cast<size_t>(world) * 37 + 1}; }

std::string Where(const Communicator& c, const char* what, DType dt, size_t count, const char* extra = "") {
  return std::string(what) + " world=" + std::to_string(c.size()) + " rank=" + std::to_string(c.rank()) +
         " dtype=" + DTypeName(dt) + " count=" + std::to_string(count) + " " + extra;
}

#define EXPECT_BUFFER(dt, got, want, count, where)                 \
  do {                                                             \
    std::string mismatch = DescribeMismatch(dt, got, want, count); \
    EXPECT_TRUE(mismatch.empty()) << where << ": " << mismatch;    \
  } while (0)

void CheckAllreduce(Communicator& c, DType dt, ReduceOp op, size_t n, bool in_place, Algorithm algo, uint64_t salt) {
  Bytes send = PoisonedBuffer(dt, n), recv = PoisonedBuffer(dt, n), want = PoisonedBuffer(dt, n);
  FillTestValues(dt, send.data(), n, c.rank(), 0, salt);
  ExpectedReduction(dt, op, c.size(), n, 0, salt, want.data());
  CollectiveOptions opts;
  opts.algorithm = algo;
  void* out = in_place ? send.data() : recv.data();
  Status s = c.Allreduce(send.data(), out, n, dt, op, opts)->Wait();
  std::string where =
      Where(c, "allreduce", dt, n, ReduceOpName(op)) + (in_place ? " in-place " : " ") + AlgorithmName(algo);
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  EXPECT_BUFFER(dt, out, want.data(), n, where);
}

void CheckReduceScatter(Communicator& c, DType dt, ReduceOp op, size_t rc, bool in_place, uint64_t salt) {
  const size_t world = c.size(), r = c.rank(), es = DTypeSize(dt);
  Bytes send = PoisonedBuffer(dt, world * rc), recv = PoisonedBuffer(dt, rc);
  Bytes want = PoisonedBuffer(dt, rc);
  FillTestValues(dt, send.data(), world * rc, c.rank(), 0, salt);
  ExpectedReduction(dt, op, c.size(), rc, r * rc, salt, want.data());
  void* out = in_place ? send.data() + r * rc * es : recv.data();
  Status s = c.ReduceScatter(send.data(), out, rc, dt, op)->Wait();
  std::string where = Where(c, "reduce_scatter", dt, rc, ReduceOpName(op)) + (in_place ? " in-place" : "");
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  EXPECT_BUFFER(dt, out, want.data(), rc, where);
}

// recv == send (not NCCL's in-place layout): the backend must stage, not race.
void CheckReduceScatterAliased(Communicator& c, DType dt, size_t rc, uint64_t salt) {
  const size_t world = c.size();
  Bytes buf = PoisonedBuffer(dt, world * rc), want = PoisonedBuffer(dt, rc);
  FillTestValues(dt, buf.data(), world * rc, c.rank(), 0, salt);
  ExpectedReduction(dt, ReduceOp::kSum, c.size(), rc, c.rank() * rc, salt, want.data());
  Status s = c.ReduceScatter(buf.data(), buf.data(), rc, dt, ReduceOp::kSum)->Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_BUFFER(dt, buf.data(), want.data(), rc, Where(c, "reduce_scatter aliased", dt, rc));
}

void CheckAllGather(Communicator& c, DType dt, size_t sc, bool in_place, uint64_t salt) {
  const size_t world = c.size(), es = DTypeSize(dt);
  Bytes send = PoisonedBuffer(dt, sc), recv = PoisonedBuffer(dt, world * sc);
  Bytes want = PoisonedBuffer(dt, world * sc);
  for (size_t p = 0; p < world; ++p) FillTestValues(dt, want.data() + p * sc * es, sc, p, 0, salt);
  const void* in = send.data();
  if (in_place) {
    in = recv.data() + c.rank() * sc * es;
    FillTestValues(dt, recv.data() + c.rank() * sc * es, sc, c.rank(), 0, salt);
  } else {
    FillTestValues(dt, send.data(), sc, c.rank(), 0, salt);
  }
  Status s = c.AllGather(in, recv.data(), sc, dt)->Wait();
  std::string where = Where(c, "allgather", dt, sc, in_place ? "in-place" : "");
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  EXPECT_BUFFER(dt, recv.data(), want.data(), world * sc, where);
}

void CheckAllGatherAliased(Communicator& c, DType dt, size_t sc, uint64_t salt) {
  const size_t world = c.size(), es = DTypeSize(dt);
  Bytes buf = PoisonedBuffer(dt, world * sc), want = PoisonedBuffer(dt, world * sc);
  for (size_t p = 0; p < world; ++p) FillTestValues(dt, want.data() + p * sc * es, sc, p, 0, salt);
  FillTestValues(dt, buf.data(), sc, c.rank(), 0, salt);  // send = first block of recv
  Status s = c.AllGather(buf.data(), buf.data(), sc, dt)->Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_BUFFER(dt, buf.data(), want.data(), world * sc, Where(c, "allgather aliased", dt, sc));
}

void CheckBroadcast(Communicator& c, DType dt, size_t n, int root, uint64_t salt) {
  Bytes buf = PoisonedBuffer(dt, n), want = PoisonedBuffer(dt, n);
  FillTestValues(dt, want.data(), n, root, 0, salt);
  if (c.rank() == root) buf = want;
  Status s = c.Broadcast(buf.data(), n, dt, root)->Wait();
  std::string where = Where(c, "broadcast", dt, n, ("root=" + std::to_string(root)).c_str());
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  EXPECT_BUFFER(dt, buf.data(), want.data(), n, where);
}

void CheckReduce(Communicator& c, DType dt, ReduceOp op, size_t n, int root, bool in_place, uint64_t salt) {
  Bytes send = PoisonedBuffer(dt, n), recv = PoisonedBuffer(dt, n), want = PoisonedBuffer(dt, n);
  FillTestValues(dt, send.data(), n, c.rank(), 0, salt);
  ExpectedReduction(dt, op, c.size(), n, 0, salt, want.data());
  void* out = in_place ? send.data() : (c.rank() == root ? recv.data() : nullptr);
  Status s = c.Reduce(send.data(), out, n, dt, op, root)->Wait();
  std::string where =
      Where(c, "reduce", dt, n, ReduceOpName(op)) + " root=" + std::to_string(root) + (in_place ? " in-place" : "");
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  if (c.rank() == root) EXPECT_BUFFER(dt, out, want.data(), n, where);
}

void CheckAllToAll(Communicator& c, DType dt, size_t cnt, bool in_place, uint64_t salt) {
  const size_t world = c.size(), es = DTypeSize(dt);
  Bytes send = PoisonedBuffer(dt, world * cnt), recv = PoisonedBuffer(dt, world * cnt);
  Bytes want = PoisonedBuffer(dt, world * cnt);
  FillTestValues(dt, send.data(), world * cnt, c.rank(), 0, salt);
  for (size_t p = 0; p < world; ++p) {
    FillTestValues(dt, want.data() + p * cnt * es, cnt, p, c.rank() * cnt, salt);
  }
  void* out = in_place ? send.data() : recv.data();
  Status s = c.AllToAll(send.data(), out, cnt, dt)->Wait();
  std::string where = Where(c, "alltoall", dt, cnt, in_place ? "in-place" : "");
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  EXPECT_BUFFER(dt, out, want.data(), world * cnt, where);
}

// Ring exchange: every rank sends to the next and receives from the previous; the sends are
// issued first on every rank, which must not deadlock.
void CheckSendRecv(Communicator& c, DType dt, size_t n, uint64_t salt) {
  const int next = (c.rank() + 1) % c.size(), prev = (c.rank() + c.size() - 1) % c.size();
  Bytes send = PoisonedBuffer(dt, n), recv = PoisonedBuffer(dt, n), want = PoisonedBuffer(dt, n);
  FillTestValues(dt, send.data(), n, c.rank(), 0, salt);
  FillTestValues(dt, want.data(), n, prev, 0, salt);
  WorkHandle s = c.Send(send.data(), n, dt, next, 7);
  WorkHandle r = c.Recv(recv.data(), n, dt, prev, 7);
  ASSERT_TRUE(s->Wait().ok());
  Status st = r->Wait();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_BUFFER(dt, recv.data(), want.data(), n, Where(c, "send/recv", dt, n));
}

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, Allreduce) {
  RunRanks(GetParam(), [](Communicator& c) {
    uint64_t salt = 1;
    for (DType dt : kAllTypes) {
      if (dt == DType::kU8) continue;
      for (size_t n : Sizes(c.size())) {
        for (ReduceOp op : kAllOps) {
          CheckAllreduce(c, dt, op, n, false, Algorithm::kAuto, salt++);
          CheckAllreduce(c, dt, op, n, true, Algorithm::kAuto, salt++);
        }
      }
    }
    // Both algorithms on both sides of the small-message threshold, and a large message.
    for (Algorithm algo : {Algorithm::kRing, Algorithm::kDirect, Algorithm::kDeterministic}) {
      for (size_t n : {size_t{5}, size_t{3001}}) {
        CheckAllreduce(c, DType::kF32, ReduceOp::kSum, n, true, algo, salt++);
        CheckAllreduce(c, DType::kBF16, ReduceOp::kMax, n, false, algo, salt++);
      }
    }
    CheckAllreduce(c, DType::kF32, ReduceOp::kSum, 65537, true, Algorithm::kAuto, salt++);
    CheckAllreduce(c, DType::kBF16, ReduceOp::kAvg, 65537, false, Algorithm::kAuto, salt++);
  });
}

TEST_P(CollectivesTest, ReduceScatter) {
  RunRanks(GetParam(), [](Communicator& c) {
    uint64_t salt = 100000;
    for (DType dt : kAllTypes) {
      if (dt == DType::kU8) continue;
      for (size_t n : Sizes(c.size())) {
        for (ReduceOp op : kAllOps) CheckReduceScatter(c, dt, op, n, false, salt++);
        CheckReduceScatter(c, dt, ReduceOp::kSum, n, true, salt++);
        CheckReduceScatterAliased(c, dt, n, salt++);
      }
    }
  });
}

TEST_P(CollectivesTest, AllGatherBroadcastAllToAll) {
  RunRanks(GetParam(), [](Communicator& c) {
    uint64_t salt = 200000;
    for (DType dt : kAllTypes) {
      for (size_t n : Sizes(c.size())) {
        CheckAllGather(c, dt, n, false, salt++);
        CheckAllGather(c, dt, n, true, salt++);
        CheckAllGatherAliased(c, dt, n, salt++);
        CheckBroadcast(c, dt, n, 0, salt++);
        CheckBroadcast(c, dt, n, c.size() - 1, salt++);
        CheckAllToAll(c, dt, n, false, salt++);
        CheckAllToAll(c, dt, n, true, salt++);
      }
    }
  });
}

TEST_P(CollectivesTest, ReduceAndSendRecvAndBarrier) {
  RunRanks(GetParam(), [](Communicator& c) {
    uint64_t salt = 300000;
    for (DType dt : kAllTypes) {
      for (size_t n : Sizes(c.size())) {
        if (dt != DType::kU8) {
          CheckReduce(c, dt, ReduceOp::kSum, n, 0, false, salt++);
          CheckReduce(c, dt, ReduceOp::kMin, n, c.size() - 1, false, salt++);
          CheckReduce(c, dt, ReduceOp::kAvg, n, c.size() / 2, true, salt++);
        }
        CheckSendRecv(c, dt, n, salt++);
        ASSERT_TRUE(c.Barrier()->Wait().ok());
      }
    }
    CheckReduce(c, DType::kF32, ReduceOp::kMax, 65537, 0, true, salt++);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesTest, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string("N").append(std::to_string(info.param));
                         });

}  // namespace
}  // namespace lockstep::comm
