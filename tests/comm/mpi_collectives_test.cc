// Every collective of the mpi backend x dtype x size x in/out of place, against exact values,
// on 1-4 mpirun ranks. Sizes include 0, 1, primes and sizes not divisible by the world size;
// reductions run with each algorithm (auto, ring = pipelined reduce-scatter, direct =
// all-gather), and one launch uses 4 KiB pipeline segments so that the small vectors of the
// test already exercise multi-segment pipelining.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/comm_test_util.h"
#include "comm/mpi_test_util.h"

namespace lockstep::comm {
namespace {

using testing::CountMismatches;
using testing::DescribeMismatch;
using testing::ExpectedReduction;
using testing::FillTestValues;
using testing::PoisonedBuffer;

const size_t kSizes[] = {0, 1, 7, 13, 1000, 4099};
const DType kReduceTypes[] = {DType::kF32, DType::kBF16, DType::kI32, DType::kI64};
const DType kAllTypes[] = {DType::kF32, DType::kBF16, DType::kI32, DType::kI64, DType::kU8};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};
const Algorithm kAlgos[] = {Algorithm::kAuto, Algorithm::kRing, Algorithm::kDirect};

std::string Where(const char* what, DType dt, ReduceOp op, size_t n, bool in_place, Algorithm a = Algorithm::kAuto) {
  return std::string(what) + " dtype=" + DTypeName(dt) + " op=" + ReduceOpName(op) + " count=" + std::to_string(n) +
         (in_place ? " in-place" : " out-of-place") + " algo=" + AlgorithmName(a);
}

void CheckAllreduce(Communicator& c) {
  const int n = c.size(), r = c.rank();
  uint64_t salt = 1;
  for (DType dt : kReduceTypes) {
    const size_t es = DTypeSize(dt);
    for (ReduceOp op : kOps) {
      for (Algorithm algo : kAlgos) {
        // Each reduce op's semantics under the default algorithm; the forced algorithms with
        // one arithmetic and one order-free op (keeps 4 oversubscribed ranks under 10 s).
        if (algo != Algorithm::kAuto && op != ReduceOp::kAvg && op != ReduceOp::kMax) continue;
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{13}, size_t{1000}, size_t{4099}, size_t{20011}}) {
          for (bool in_place : {false, true}) {
            ++salt;
            std::vector<unsigned char> send(count * es + 1), want(count * es + 1);
            FillTestValues(dt, send.data(), count, r, 0, salt);
            ExpectedReduction(dt, op, n, count, 0, salt, want.data());
            std::vector<unsigned char> recv = in_place ? send : PoisonedBuffer(dt, count + 1);
            CollectiveOptions o;
            o.algorithm = algo;
            void* out = in_place ? send.data() : recv.data();
            Status s = c.Allreduce(send.data(), out, count, dt, op, o)->Wait();
            ASSERT_TRUE(s.ok()) << s.ToString();
            EXPECT_EQ("", DescribeMismatch(dt, out, want.data(), count))
                << Where("allreduce", dt, op, count, in_place, algo);
          }
        }
      }
    }
  }
  // Bytes cannot be reduced: a local argument error, no sequence number consumed.
  unsigned char b[4] = {0};
  Status s = c.Allreduce(b, b, 4, DType::kU8, ReduceOp::kSum)->Wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

void CheckReduceScatter(Communicator& c) {
  const int n = c.size(), r = c.rank();
  uint64_t salt = 1000;
  for (DType dt : kReduceTypes) {
    const size_t es = DTypeSize(dt);
    for (ReduceOp op : kOps) {
      for (size_t rc : kSizes) {
        for (bool in_place : {false, true}) {
          ++salt;
          std::vector<unsigned char> send(n * rc * es + 1), want(rc * es + 1);
          FillTestValues(dt, send.data(), n * rc, r, 0, salt);
          ExpectedReduction(dt, op, n, rc, r * rc, salt, want.data());
          std::vector<unsigned char> recv = PoisonedBuffer(dt, rc + 1);
          void* out = in_place ? send.data() + r * rc * es : recv.data();
          Status s = c.ReduceScatter(send.data(), out, rc, dt, op)->Wait();
          ASSERT_TRUE(s.ok()) << s.ToString();
          EXPECT_EQ("", DescribeMismatch(dt, out, want.data(), rc)) << Where("reduce_scatter", dt, op, rc, in_place);
        }
      }
    }
  }
}

void CheckAllGather(Communicator& c) {
  const int n = c.size(), r = c.rank();
  uint64_t salt = 2000;
  for (DType dt : kAllTypes) {
    const size_t es = DTypeSize(dt);
    for (size_t count : kSizes) {
      for (bool in_place : {false, true}) {
        ++salt;
        std::vector<unsigned char> want(n * count * es + 1), mine(count * es + 1);
        for (int p = 0; p < n; ++p) FillTestValues(dt, want.data() + p * count * es, count, p, 0, salt);
        FillTestValues(dt, mine.data(), count, r, 0, salt);
        std::vector<unsigned char> recv = PoisonedBuffer(dt, n * count + 1);
        const void* send = mine.data();
        if (in_place) {
          std::memcpy(recv.data() + r * count * es, mine.data(), count * es);
          send = recv.data() + r * count * es;
        }
        Status s = c.AllGather(send, recv.data(), count, dt)->Wait();
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ("", DescribeMismatch(dt, recv.data(), want.data(), n * count))
            << Where("allgather", dt, ReduceOp::kSum, count, in_place);
      }
    }
  }
}

void CheckBroadcastAndReduce(Communicator& c) {
  const int n = c.size(), r = c.rank();
  uint64_t salt = 3000;
  for (int root = 0; root < n; ++root) {
    for (DType dt : kAllTypes) {
      const size_t es = DTypeSize(dt);
      for (size_t count : kSizes) {
        ++salt;
        std::vector<unsigned char> buf(count * es + 1), want(count * es + 1);
        FillTestValues(dt, want.data(), count, root, 0, salt);
        if (r == root) {
          std::memcpy(buf.data(), want.data(), count * es);
        } else {
          buf = PoisonedBuffer(dt, count + 1);
        }
        Status s = c.Broadcast(buf.data(), count, dt, root)->Wait();
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ("", DescribeMismatch(dt, buf.data(), want.data(), count))
            << "broadcast root=" << root << " dtype=" << DTypeName(dt) << " count=" << count;
        if (dt == DType::kU8) continue;
        for (ReduceOp op : kOps) {
          ++salt;
          std::vector<unsigned char> send(count * es + 1);
          FillTestValues(dt, send.data(), count, r, 0, salt);
          ExpectedReduction(dt, op, n, count, 0, salt, want.data());
          std::vector<unsigned char> recv = PoisonedBuffer(dt, count + 1);
          s = c.Reduce(send.data(), r == root ? recv.data() : nullptr, count, dt, op, root)->Wait();
          ASSERT_TRUE(s.ok()) << s.ToString();
          if (r == root) {
            EXPECT_EQ("", DescribeMismatch(dt, recv.data(), want.data(), count))
                << Where("reduce", dt, op, count, false) << " root=" << root;
          }
          // In place on the root.
          s = c.Reduce(send.data(), r == root ? send.data() : nullptr, count, dt, op, root)->Wait();
          ASSERT_TRUE(s.ok()) << s.ToString();
          if (r == root) {
            EXPECT_EQ("", DescribeMismatch(dt, send.data(), want.data(), count))
                << Where("reduce", dt, op, count, true) << " root=" << root;
          }
        }
      }
    }
  }
}

void CheckAllToAll(Communicator& c) {
  const int n = c.size(), r = c.rank();
  uint64_t salt = 4000;
  for (DType dt : kAllTypes) {
    const size_t es = DTypeSize(dt);
    for (size_t count : kSizes) {
      for (bool in_place : {false, true}) {
        ++salt;
        std::vector<unsigned char> send(n * count * es + 1), want(n * count * es + 1);
        FillTestValues(dt, send.data(), n * count, r, 0, salt);
        // Block p of my receive buffer is block r of rank p's send buffer.
        for (int p = 0; p < n; ++p) {
          FillTestValues(dt, want.data() + p * count * es, count, p, r * count, salt);
        }
        std::vector<unsigned char> recv = in_place ? send : PoisonedBuffer(dt, n * count + 1);
        Status s = c.AllToAll(in_place ? recv.data() : send.data(), recv.data(), count, dt)->Wait();
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ("", DescribeMismatch(dt, recv.data(), want.data(), n * count))
            << Where("alltoall", dt, ReduceOp::kSum, count, in_place);
      }
    }
  }
}

void CheckSendRecv(Communicator& c) {
  const int n = c.size(), r = c.rank();
  if (n < 2) return;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (DType dt : kAllTypes) {
    const size_t es = DTypeSize(dt);
    // 300000 elements: far above the eager limit, so a Send that waited for its Recv would
    // deadlock here (everybody sends first).
    for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{4099}, size_t{300000}}) {
      std::vector<unsigned char> a(count * es + 1), b(count * es + 1);
      FillTestValues(dt, a.data(), count, r, 0, 7);
      FillTestValues(dt, b.data(), count, r, 100, 7);
      ASSERT_TRUE(c.Send(a.data(), count, dt, next, 5)->Wait().ok());
      ASSERT_TRUE(c.Send(b.data(), count, dt, next, 5)->Wait().ok());
      std::memset(a.data(), 0, a.size());  // the sends copied their data
      std::vector<unsigned char> got1 = PoisonedBuffer(dt, count + 1), got2 = got1, want(count * es + 1);
      ASSERT_TRUE(c.Recv(got1.data(), count, dt, prev, 5)->Wait().ok());
      ASSERT_TRUE(c.Recv(got2.data(), count, dt, prev, 5)->Wait().ok());
      FillTestValues(dt, want.data(), count, prev, 0, 7);
      EXPECT_EQ("", DescribeMismatch(dt, got1.data(), want.data(), count)) << "first message";
      FillTestValues(dt, want.data(), count, prev, 100, 7);
      EXPECT_EQ("", DescribeMismatch(dt, got2.data(), want.data(), count)) << "second message";
    }
  }
  // Different tags can be received in the other order.
  int32_t x = 10 + r, y = 20 + r, gx = 0, gy = 0;
  ASSERT_TRUE(c.Send(&x, 1, DType::kI32, next, 1)->Wait().ok());
  ASSERT_TRUE(c.Send(&y, 1, DType::kI32, next, 2)->Wait().ok());
  ASSERT_TRUE(c.Recv(&gy, 1, DType::kI32, prev, 2)->Wait().ok());
  ASSERT_TRUE(c.Recv(&gx, 1, DType::kI32, prev, 1)->Wait().ok());
  EXPECT_EQ(gx, 10 + prev);
  EXPECT_EQ(gy, 20 + prev);
  // A count mismatch is reported, not truncated silently.
  int32_t big[3] = {1, 2, 3}, small[2] = {0, 0};
  ASSERT_TRUE(c.Send(big, 3, DType::kI32, next, 3)->Wait().ok());
  Status s = c.Recv(small, 2, DType::kI32, prev, 3)->Wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

void CheckAsyncOverlap(Communicator& c) {
  // Many operations in flight at once complete in issue order with correct results.
  const int n = c.size(), r = c.rank();
  const size_t count = 50000;
  std::vector<std::vector<float>> bufs(6, std::vector<float>(count));
  std::vector<WorkHandle> works;
  for (size_t k = 0; k < bufs.size(); ++k) {
    for (size_t i = 0; i < count; ++i) bufs[k][i] = static_cast<float>((r + 1) * (k + 1) + i % 5);
    works.push_back(c.Allreduce(bufs[k].data(), bufs[k].data(), count, DType::kF32, ReduceOp::kSum));
  }
  works.push_back(c.Barrier());
  for (auto& w : works) ASSERT_TRUE(w->Wait().ok());
  for (size_t k = 0; k < bufs.size(); ++k) {
    for (size_t i = 0; i < count; i += 997) {
      float want = static_cast<float>((k + 1) * n * (n + 1) / 2 + n * (i % 5));
      ASSERT_EQ(bufs[k][i], want) << "buffer " << k << " element " << i;
    }
  }
}

void CheckWorld(Communicator& c) {
  EXPECT_STREQ(c.backend_name(), "mpi");
  EXPECT_EQ(c.size(), std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
  EXPECT_EQ(c.rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
}

void CheckReductions() {
  Communicator& c = testing::World();
  CheckWorld(c);
  CheckAllreduce(c);
  CheckReduceScatter(c);
  CheckAsyncOverlap(c);
  EXPECT_TRUE(c.Barrier()->Wait().ok());
}

void CheckDataMovement() {
  Communicator& c = testing::World();
  CheckWorld(c);
  CheckAllGather(c);
  CheckBroadcastAndReduce(c);
  CheckAllToAll(c);
  CheckSendRecv(c);
  EXPECT_TRUE(c.Barrier()->Wait().ok());
}

// One mpirun launch per test case; reductions and data movement are separate launches so
// that each stays well under 10 s on 4 oversubscribed ranks (and under ASan).
#define LS_MPI_COLLECTIVE_TESTS(np)                              \
  TEST(MpiCollectives, ReductionsNp##np) {                       \
    if (!InsideMpirun()) return testing::ExpectMpirunPasses(np); \
    CheckReductions();                                           \
  }                                                              \
  TEST(MpiCollectives, DataMovementNp##np) {                     \
    if (!InsideMpirun()) return testing::ExpectMpirunPasses(np); \
    CheckDataMovement();                                         \
  }

LS_MPI_COLLECTIVE_TESTS(1)
LS_MPI_COLLECTIVE_TESTS(2)
LS_MPI_COLLECTIVE_TESTS(3)
LS_MPI_COLLECTIVE_TESTS(4)

// 4 KiB pipeline segments: the small vectors above already run many pipelined segments.
TEST(MpiCollectives, ReductionsNp3SmallSegments) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(3, {"LOCKSTEP_MPI_SEGMENT_BYTES=4096"});
  CheckReductions();
}

}  // namespace
}  // namespace lockstep::comm
