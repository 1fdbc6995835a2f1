// The hierarchical backend (one process per host, workers as threads) against exact expected
// values: every collective on 2 and 4 "hosts" (MPI processes on this machine) of 2 workers,
// Split into the groups a mesh makes (inside a host, one a host, both), and the
// deterministic sum giving the bits of the fixed tree computed directly.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "comm/mpi_test_util.h"
#include "lockstep/comm/hier/hier_world.h"

namespace lockstep::comm {
namespace {

constexpr int kWorkers = 2;  // a host

// Rank p's element k: small integers, so every float sum below is exact.
float Value(int p, size_t k) { return static_cast<float>((p + 1) * static_cast<int>(k % 7 + 1)); }
float SumOver(int n, size_t k) {
  float s = 0;
  for (int p = 0; p < n; ++p) s += Value(p, k);
  return s;
}

void CheckCollectives(Communicator& c) {
  const int n = c.size(), r = c.rank();
  EXPECT_STREQ(c.backend_name(), "hier");
  // Allreduce: a count the workers of a host divide and one they do not, in and out of place.
  for (size_t count : {size_t{8}, size_t{7}, size_t{1}, size_t{100003}}) {
    std::vector<float> in(count), out(count, -1.0f);
    for (size_t k = 0; k < count; ++k) in[k] = Value(r, k);
    ASSERT_TRUE(c.Allreduce(in.data(), out.data(), count, DType::kF32, ReduceOp::kSum)->Wait().ok());
    for (size_t k = 0; k < count; ++k) ASSERT_EQ(out[k], SumOver(n, k)) << "count " << count << " element " << k;
    ASSERT_TRUE(c.Allreduce(in.data(), in.data(), count, DType::kF32, ReduceOp::kMax)->Wait().ok());
    for (size_t k = 0; k < count; ++k) ASSERT_EQ(in[k], Value(n - 1, k));
  }
  // Integer average truncates as one division by the world size would.
  std::vector<int64_t> ints = {static_cast<int64_t>(r) * 7 - 3, -static_cast<int64_t>(r) * 5, 1000003};
  ASSERT_TRUE(c.Allreduce(ints.data(), ints.data(), 3, DType::kI64, ReduceOp::kAvg)->Wait().ok());
  int64_t s0 = 0, s1 = 0;
  for (int p = 0; p < n; ++p) s0 += p * 7 - 3, s1 += -p * 5;
  EXPECT_EQ(ints[0], s0 / n);
  EXPECT_EQ(ints[1], s1 / n);
  EXPECT_EQ(ints[2], 1000003);

  // Reduce-scatter: rank r gets the sum of block r.
  const size_t rc = 5;
  std::vector<float> rs_in(n * rc), rs_out(rc);
  for (size_t k = 0; k < rs_in.size(); ++k) rs_in[k] = Value(r, k);
  ASSERT_TRUE(c.ReduceScatter(rs_in.data(), rs_out.data(), rc, DType::kF32, ReduceOp::kSum)->Wait().ok());
  for (size_t k = 0; k < rc; ++k) EXPECT_EQ(rs_out[k], SumOver(n, r * rc + k)) << k;
  // All-gather: block p comes from rank p.
  std::vector<float> ag_in(rc), ag_out(n * rc);
  for (size_t k = 0; k < rc; ++k) ag_in[k] = Value(r, k) + 0.5f;
  ASSERT_TRUE(c.AllGather(ag_in.data(), ag_out.data(), rc, DType::kF32)->Wait().ok());
  for (int p = 0; p < n; ++p)
    for (size_t k = 0; k < rc; ++k) ASSERT_EQ(ag_out[p * rc + k], Value(p, k) + 0.5f) << p << "," << k;
  // Broadcast and reduce from every root.
  for (int root = 0; root < n; ++root) {
    std::vector<float> b(9);
    for (size_t k = 0; k < b.size(); ++k) b[k] = Value(r, k);
    ASSERT_TRUE(c.Broadcast(b.data(), b.size(), DType::kF32, root)->Wait().ok());
    for (size_t k = 0; k < b.size(); ++k) ASSERT_EQ(b[k], Value(root, k));
    std::vector<float> in(9), out(9, -1.0f);
    for (size_t k = 0; k < in.size(); ++k) in[k] = Value(r, k);
    ASSERT_TRUE(c.Reduce(in.data(), r == root ? out.data() : nullptr, 9, DType::kF32, ReduceOp::kSum, root)
                    ->Wait()
                    .ok());
    if (r == root) {
      for (size_t k = 0; k < out.size(); ++k) ASSERT_EQ(out[k], SumOver(n, k));
    }
  }
  // All-to-all: block p of rank q's send lands in block q of rank p's recv.
  std::vector<int32_t> a2a(n * 2), a2a_out(n * 2);
  for (int p = 0; p < n; ++p) a2a[2 * p] = r * 100 + p, a2a[2 * p + 1] = -r;
  ASSERT_TRUE(c.AllToAll(a2a.data(), a2a_out.data(), 2, DType::kI32)->Wait().ok());
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(a2a_out[2 * q], q * 100 + r);
    EXPECT_EQ(a2a_out[2 * q + 1], -q);
  }
  // Send/recv inside a host and across hosts at the same local index.
  const int local = r % kWorkers, host = r / kWorkers, hosts = n / kWorkers;
  const int same_host_peer = host * kWorkers + (local ^ 1);
  const int next_host_peer = ((host + 1) % hosts) * kWorkers + local;
  const int prev_host_peer = ((host + hosts - 1) % hosts) * kWorkers + local;
  int32_t out_a = r, out_b = 10 * r, in_a = -1, in_b = -1;
  ASSERT_TRUE(c.Send(&out_a, 1, DType::kI32, same_host_peer, 3)->Wait().ok());
  ASSERT_TRUE(c.Send(&out_b, 1, DType::kI32, next_host_peer, 4)->Wait().ok());
  ASSERT_TRUE(c.Recv(&in_a, 1, DType::kI32, same_host_peer, 3)->Wait().ok());
  ASSERT_TRUE(c.Recv(&in_b, 1, DType::kI32, prev_host_peer, 4)->Wait().ok());
  EXPECT_EQ(in_a, same_host_peer);
  EXPECT_EQ(in_b, 10 * prev_host_peer);
  // Across hosts at another local index (the host's channel), a large message too.
  const int diagonal_to = ((host + 1) % hosts) * kWorkers + (local ^ 1);
  const int diagonal_from = ((host + hosts - 1) % hosts) * kWorkers + (local ^ 1);
  std::vector<float> big_out(300000), big_in(300000, -1.0f);
  for (size_t k = 0; k < big_out.size(); ++k) big_out[k] = Value(r, k);
  ASSERT_TRUE(c.Send(big_out.data(), big_out.size(), DType::kF32, diagonal_to, 5)->Wait().ok());
  ASSERT_TRUE(c.Send(&out_b, 1, DType::kI32, diagonal_to, 6)->Wait().ok());
  ASSERT_TRUE(c.Recv(&in_b, 1, DType::kI32, diagonal_from, 6)->Wait().ok());
  ASSERT_TRUE(c.Recv(big_in.data(), big_in.size(), DType::kF32, diagonal_from, 5)->Wait().ok());
  EXPECT_EQ(in_b, 10 * diagonal_from);
  for (size_t k = 0; k < big_in.size(); k += 997) ASSERT_EQ(big_in[k], Value(diagonal_from, k));
  ASSERT_TRUE(c.Barrier()->Wait().ok());

  // The deterministic sum: V = 2n contributions, two a rank, against the tree computed here.
  const size_t count = 1001;
  const int64_t v = 2 * n;
  std::vector<std::vector<float>> all(v, std::vector<float>(count));
  for (int64_t i = 0; i < v; ++i)
    for (size_t k = 0; k < count; ++k) all[i][k] = 1.0f / static_cast<float>(i + 3) + static_cast<float>(k) * 1e-3f;
  std::vector<const float*> ptrs;
  for (auto& a : all) ptrs.push_back(a.data());
  std::vector<float> expected(count);
  DeterministicTreeSum(ptrs.data(), v, expected.data(), count);
  std::vector<float> mine(2 * count), got(count);
  std::copy(all[2 * r].begin(), all[2 * r].end(), mine.begin());
  std::copy(all[2 * r + 1].begin(), all[2 * r + 1].end(), mine.begin() + count);
  ASSERT_TRUE(c.DeterministicAllreduceF32(mine.data(), got.data(), count, v)->Wait().ok());
  for (size_t k = 0; k < count; ++k) ASSERT_EQ(got[k], expected[k]) << k;  // bit for bit
}

// The groups of a mesh with tp = 2 inside each host: tp (inside a host, threads), dp (one a
// host, mpi), a copy of the world (hierarchical), and a group split again.
void CheckSplits(Communicator& c) {
  const int n = c.size(), r = c.rank();
  auto tp = c.Split(r / kWorkers, r);
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  EXPECT_STREQ((*tp)->backend_name(), "threads");
  EXPECT_EQ((*tp)->size(), kWorkers);
  EXPECT_EQ((*tp)->rank(), r % kWorkers);
  auto dp = c.Split(r % kWorkers, r);
  ASSERT_TRUE(dp.ok()) << dp.status().ToString();
  EXPECT_STREQ((*dp)->backend_name(), "mpi");
  EXPECT_EQ((*dp)->size(), n / kWorkers);
  EXPECT_EQ((*dp)->rank(), r / kWorkers);
  auto copy = c.Split(0, r);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_STREQ((*copy)->backend_name(), "hier");
  ASSERT_EQ((*copy)->rank(), r);
  float x = static_cast<float>(r);
  ASSERT_TRUE((*copy)->Allreduce(&x, &x, 1, DType::kF32, ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ(x, static_cast<float>(n * (n - 1) / 2));
  float y = static_cast<float>(r);
  ASSERT_TRUE((*dp)->Allreduce(&y, &y, 1, DType::kF32, ReduceOp::kSum)->Wait().ok());
  float expected_dp = 0;
  for (int p = r % kWorkers; p < n; p += kWorkers) expected_dp += static_cast<float>(p);
  EXPECT_EQ(y, expected_dp);
  // Rank 0 out of every group; the others in one group ordered by descending rank. Hosts 1..
  // then appear in reverse, and host 0 with one member only: not host-major with equal
  // members, refused on every rank alike.
  auto odd = c.Split(r == 0 ? -1 : 0, -r);
  EXPECT_EQ(odd.status().code(), StatusCode::kInvalidArgument) << odd.status().ToString();
  // After a refused split the communicator still works.
  auto halves = c.Split(r < n / 2 ? 0 : 1, r);
  ASSERT_TRUE(halves.ok()) << halves.status().ToString();
  ASSERT_TRUE(c.Barrier()->Wait().ok());
}

void RunOnEveryWorker(void (*check)(Communicator&)) {
  auto world = CreateHierWorld(kWorkers);
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  std::vector<std::thread> threads;
  for (int j = 0; j < kWorkers; ++j) threads.emplace_back([&, j] { check(*(*world)[j]); });
  for (auto& t : threads) t.join();
}

TEST(HierCollectives, TwoHostsOfTwo) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(2);
  RunOnEveryWorker(CheckCollectives);
}

TEST(HierCollectives, FourHostsOfTwo) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(4);
  RunOnEveryWorker(CheckCollectives);
}

TEST(HierSplit, TwoHostsOfTwo) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(2);
  RunOnEveryWorker(CheckSplits);
}

TEST(HierSplit, FourHostsOfTwo) {
  if (!InsideMpirun()) return testing::ExpectMpirunPasses(4);
  RunOnEveryWorker(CheckSplits);
}

}  // namespace
}  // namespace lockstep::comm
