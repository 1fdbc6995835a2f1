// DeterministicAllreduceF32 gives the same bits at world sizes 1, 2, 4 and 8 for the same V
// contributions, equal to the fixed tree of DeterministicTreeSum, and that tree differs from
// the naive left-to-right order (so the comparison is sensitive).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "comm/comm_test_util.h"

namespace lockstep::comm {
namespace {

using testing::RunRanks;

// contributions[v] for v < V, each `count` floats with widely spread magnitudes, so that the
// order of summation changes the rounded result.
std::vector<std::vector<float>> RandomContributions(int64_t v_total, size_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 20);
  std::vector<std::vector<float>> c(v_total, std::vector<float>(count));
  for (auto& vec : c) {
    for (float& x : vec) x = std::ldexp(mant(gen), expo(gen));
  }
  return c;
}

// Reference: the complete binary tree written recursively.
float TreeRef(const std::vector<std::vector<float>>& c, int64_t lo, int64_t hi, size_t i) {
  if (hi - lo == 1) return c[lo][i];
  int64_t mid = lo + (hi - lo) / 2;
  return TreeRef(c, lo, mid, i) + TreeRef(c, mid, hi, i);
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(DeterministicTreeSum, MatchesRecursiveTreeAndDiffersFromNaiveOrder) {
  const size_t count = 1500;  // several internal blocks
  for (int64_t n : {1, 2, 4, 8, 16, 64}) {
    auto c = RandomContributions(n, count, 7 + static_cast<uint32_t>(n));
    std::vector<const float*> ptrs;
    for (auto& v : c) ptrs.push_back(v.data());
    std::vector<float> got(count), want(count), naive(count);
    DeterministicTreeSum(ptrs.data(), n, got.data(), count);
    for (size_t i = 0; i < count; ++i) {
      want[i] = TreeRef(c, 0, n, i);
      float s = 0;
      for (int64_t k = 0; k < n; ++k) s += c[k][i];
      naive[i] = s;
    }
    EXPECT_TRUE(SameBits(got, want)) << "n=" << n;
    if (n >= 4) {
      EXPECT_FALSE(SameBits(got, naive)) << "n=" << n << ": test data not sensitive";
    }
  }
}

TEST(DeterministicTreeSum, OutputMayAliasFirstInput) {
  auto c = RandomContributions(4, 700, 3);
  std::vector<float> want(700);
  std::vector<const float*> ptrs;
  for (auto& v : c) ptrs.push_back(v.data());
  DeterministicTreeSum(ptrs.data(), 4, want.data(), 700);
  DeterministicTreeSum(ptrs.data(), 4, c[0].data(), 700);
  EXPECT_TRUE(SameBits(c[0], want));
}

// Runs DeterministicAllreduceF32 over `world` ranks and returns every rank's output.
std::vector<std::vector<float>> RunDeterministic(int world, const std::vector<std::vector<float>>& c, size_t count,
                                                 bool in_place) {
  const int64_t v_total = static_cast<int64_t>(c.size());
  std::vector<std::vector<float>> outs(world);
  RunRanks(world, [&](Communicator& comm) {
    const int64_t local = v_total / world;
    std::vector<float> mine(local * count);
    for (int64_t k = 0; k < local; ++k) {
      std::memcpy(&mine[k * count], c[comm.rank() * local + k].data(), count * sizeof(float));
    }
    std::vector<float> out(count, -1.0f);
    float* dst = in_place ? mine.data() : out.data();
    Status s = comm.DeterministicAllreduceF32(mine.data(), dst, count, v_total)->Wait();
    ASSERT_TRUE(s.ok()) << s.ToString();
    outs[comm.rank()].assign(dst, dst + count);
  });
  return outs;
}

TEST(DeterministicAllreduce, SameBitsAtEveryWorldSize) {
  const int64_t v_total = 16;
  for (size_t count : {size_t{1}, size_t{13}, size_t{1000}, size_t{4099}, size_t{40000}}) {
    auto c = RandomContributions(v_total, count, 11 + static_cast<uint32_t>(count));
    std::vector<const float*> ptrs;
    for (auto& v : c) ptrs.push_back(v.data());
    std::vector<float> want(count);
    DeterministicTreeSum(ptrs.data(), v_total, want.data(), count);
    for (int world : {1, 2, 4, 8}) {
      for (bool in_place : {false, true}) {
        auto outs = RunDeterministic(world, c, count, in_place);
        for (int r = 0; r < world; ++r) {
          EXPECT_TRUE(SameBits(outs[r], want))
              << "count=" << count << " world=" << world << " rank=" << r << (in_place ? " in-place" : "");
        }
      }
    }
  }
}

// The plain allreduce of per-rank partial sums does depend on the world size; the
// deterministic one must not. Shows that the world-size test above can fail.
TEST(DeterministicAllreduce, PlainAllreduceOfPartialsDiffersAcrossWorldSizes) {
  const int64_t v_total = 8;
  const size_t count = 2000;
  auto c = RandomContributions(v_total, count, 99);
  std::vector<std::vector<float>> plain(2);
  for (int idx = 0; idx < 2; ++idx) {
    const int world = idx == 0 ? 2 : 8;
    RunRanks(world, [&](Communicator& comm) {
      const int64_t local = v_total / world;
      std::vector<float> partial(count, 0.0f);
      for (int64_t k = 0; k < local; ++k) {
        for (size_t i = 0; i < count; ++i) partial[i] += c[comm.rank() * local + k][i];
      }
      ASSERT_TRUE(comm.Allreduce(partial.data(), partial.data(), count, DType::kF32, ReduceOp::kSum)->Wait().ok());
      if (comm.rank() == 0) plain[idx] = partial;
    });
  }
  EXPECT_FALSE(SameBits(plain[0], plain[1]));
}

TEST(DeterministicAllreduce, InvalidContributionCounts) {
  RunRanks(4, [](Communicator& comm) {
    std::vector<float> buf(64, 1.0f);
    for (int64_t v : {int64_t{0}, int64_t{-4}, int64_t{12}, int64_t{2}}) {
      Status s = comm.DeterministicAllreduceF32(buf.data(), buf.data(), 4, v)->Wait();
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "V=" << v << ": " << s.ToString();
    }
    // Still usable afterwards.
    Status s = comm.DeterministicAllreduceF32(buf.data(), buf.data(), 4, 8)->Wait();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(buf[0], 8.0f);
  });
  RunRanks(3, [](Communicator& comm) {
    std::vector<float> buf(8, 1.0f);
    Status s = comm.DeterministicAllreduceF32(buf.data(), buf.data(), 4, 4)->Wait();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  });
}

}  // namespace
}  // namespace lockstep::comm
