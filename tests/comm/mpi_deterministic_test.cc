// The mpi backend's reductions give the same bits as the threads backend:
//  - DeterministicAllreduceF32 over the same V contributions equals DeterministicTreeSum over
//    all V (computed locally) and the threads backend's result at world sizes 1, 2, 4, 8,
//    whatever the number of mpirun ranks;
//  - plain Allreduce (sum, f32/bf16) of non-integer values equals the threads backend's at the
//    same world size, for every algorithm (both reduce each element over ranks 0..n-1 in
//    order).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "comm/comm_test_util.h"
#include "comm/mpi_test_util.h"
#include "lockstep/comm/reduce_kernels.h"
#include "lockstep/core/rng.h"

namespace lockstep::comm {
namespace {

// Contribution c (of V), `count` floats: normal values of very different magnitudes, so
// that any change of summation order changes bits.
std::vector<float> Contribution(int64_t c, size_t count) {
  Rng rng(1234, static_cast<uint64_t>(c));
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = rng.Normal() * static_cast<float>(1 + (i % 7) * 1000);
  return v;
}

std::vector<float> Contributions(int64_t first, int64_t n, size_t count) {
  std::vector<float> all;
  for (int64_t c = first; c < first + n; ++c) {
    std::vector<float> v = Contribution(c, count);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

bool SameBits(const void* a, const void* b, size_t bytes) { return bytes == 0 || std::memcmp(a, b, bytes) == 0; }

std::vector<float> ThreadsDeterministic(int world, int64_t total, size_t count) {
  std::vector<float> result(count);
  testing::RunRanks(world, [&](Communicator& c) {
    const int64_t local = total / c.size();
    std::vector<float> mine = Contributions(c.rank() * local, local, count);
    std::vector<float> out(count);
    Status s = c.DeterministicAllreduceF32(mine.data(), out.data(), count, total)->Wait();
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (c.rank() == 0) result = out;
  });
  return result;
}

void CheckDeterministic() {
  Communicator& c = testing::World();
  const int n = c.size(), r = c.rank();
  for (int64_t total : {int64_t{4}, int64_t{8}, int64_t{16}}) {
    if (total % n != 0) continue;
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{13}, size_t{1000}, size_t{4099}, size_t{40000}}) {
      std::vector<float> all = Contributions(0, total, count);
      std::vector<const float*> leaves;
      for (int64_t k = 0; k < total; ++k) leaves.push_back(all.data() + k * count);
      std::vector<float> want(count);
      DeterministicTreeSum(leaves.data(), total, want.data(), count);

      const int64_t local = total / n;
      std::vector<float> mine(all.begin() + r * local * count, all.begin() + (r + 1) * local * count);
      std::vector<float> out(count, -1.0f);
      Status s = c.DeterministicAllreduceF32(mine.data(), out.data(), count, total)->Wait();
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_TRUE(SameBits(out.data(), want.data(), count * sizeof(float)))
          << "V=" << total << " count=" << count << " world=" << n;
      // In place: out aliases the contributions.
      s = c.DeterministicAllreduceF32(mine.data(), mine.data(), count, total)->Wait();
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_TRUE(SameBits(mine.data(), want.data(), count * sizeof(float)))
          << "in place V=" << total << " count=" << count;
      // The threads backend at every world size that divides V, on rank 0 only (one process
      // suffices; each rank would compute the same).
      if (r == 0 && total == 16 && (count == 13 || count == 40000)) {
        for (int world : {1, 2, 4, 8}) {
          if (total % world != 0) continue;
          std::vector<float> t = ThreadsDeterministic(world, total, count);
          EXPECT_TRUE(SameBits(t.data(), want.data(), count * sizeof(float)))
              << "threads world " << world << " V=" << total << " count=" << count;
        }
      }
    }
  }
  // Invalid V: local argument errors that consume no sequence number.
  float x[2] = {0, 0};
  EXPECT_EQ(c.DeterministicAllreduceF32(x, x, 1, 3 * n)->Wait().code(), StatusCode::kInvalidArgument);
  if (n > 1) {
    EXPECT_EQ(c.DeterministicAllreduceF32(x, x, 1, 1)->Wait().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(c.Barrier()->Wait().ok());
}

// Allreduce of rank r's vector Contribution(r) on `world` threads; rank 0's result.

std::vector<unsigned char> ThreadsAllreduce(int world, DType dt, ReduceOp op, size_t count) {
  std::vector<unsigned char> result(count * DTypeSize(dt));
  testing::RunRanks(world, [&](Communicator& c) {
    std::vector<float> f = Contribution(c.rank(), count);
    std::vector<unsigned char> buf(count * DTypeSize(dt));
    if (dt == DType::kF32) {
      std::memcpy(buf.data(), f.data(), buf.size());
    } else {
      F32ToBf16(f.data(), reinterpret_cast<uint16_t*>(buf.data()), count);
    }
    Status s = c.Allreduce(buf.data(), buf.data(), count, dt, op)->Wait();
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (c.rank() == 0) result = buf;
  });
  return result;
}

void CheckAllreduceMatchesThreads() {
  Communicator& c = testing::World();
  const int n = c.size(), r = c.rank();
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      for (size_t count : {size_t{13}, size_t{4099}, size_t{100003}}) {
        std::vector<unsigned char> want;
        if (r == 0) want = ThreadsAllreduce(n, dt, op, count);
        std::vector<float> f = Contribution(r, count);
        for (Algorithm algo : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kDirect}) {
          std::vector<unsigned char> buf(count * DTypeSize(dt));
          if (dt == DType::kF32) {
            std::memcpy(buf.data(), f.data(), buf.size());
          } else {
            F32ToBf16(f.data(), reinterpret_cast<uint16_t*>(buf.data()), count);
          }
          CollectiveOptions o;
          o.algorithm = algo;
          Status s = c.Allreduce(buf.data(), buf.data(), count, dt, op, o)->Wait();
          ASSERT_TRUE(s.ok()) << s.ToString();
          if (r == 0) {
            EXPECT_TRUE(SameBits(buf.data(), want.data(), buf.size()))
                << "dtype=" << DTypeName(dt) << " op=" << ReduceOpName(op) << " count=" << count
                << " algo=" << AlgorithmName(algo) << ": "
                << testing::DescribeMismatch(dt, buf.data(), want.data(), count);
          }
        }
      }
    }
  }
}

TEST(MpiDeterministic, Np1) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(1);
  CheckDeterministic();
  CheckAllreduceMatchesThreads();
}

TEST(MpiDeterministic, Np2) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(2);
  CheckDeterministic();
  CheckAllreduceMatchesThreads();
}

TEST(MpiDeterministic, Np3AllreduceMatchesThreads) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(3);
  CheckAllreduceMatchesThreads();
}

TEST(MpiDeterministic, Np4) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(4, {"LOCKSTEP_MPI_SEGMENT_BYTES=8192"});
  CheckDeterministic();
  CheckAllreduceMatchesThreads();
}

}  // namespace
}  // namespace lockstep::comm
