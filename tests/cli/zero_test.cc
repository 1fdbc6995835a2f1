// ZeRO stage 1 (issue 7): optimizer state sharded over the data-parallel ranks gives the
// weights of one worker (deterministic mode) and of the replicated run (default mode) bit
// for bit, holds 1/N of the optimizer state per rank, and its per-rank checkpoint shards
// resume in another layout and world size.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kSteps = 8;

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<std::string> kDet = {"--deterministic"};

nlohmann::json MemoryRow(const std::string& dir) {
  for (const std::string& l : ReadLines(dir + "/metrics.jsonl")) {
    auto j = nlohmann::json::parse(l);
    if (j.value("event", "") == "memory") return j;
  }
  return {};
}

TEST(Zero1, MatchesOneWorkerAndShardsTheOptimizerState) {
  const std::string one = TrainTiny("zero-one", kSteps, 4, kDet);
  const std::string four = TrainTiny("zero-four", kSteps, 4, With(kDet, {"--nproc", "4", "--zero", "1"}));
  EXPECT_EQ(DoneHash(four), DoneHash(one));

  // Rank 0's AdamW moments: 8 bytes per element of its ceil(Ψ/4)-element shard, against 8Ψ.
  nlohmann::json full = MemoryRow(one), shard = MemoryRow(four);
  ASSERT_FALSE(full.empty());
  ASSERT_FALSE(shard.empty());
  const int64_t psi = full["parameters"].get<int64_t>();
  // Parameters and gradients as the allocator counts them: one flat buffer each.
  EXPECT_EQ(full["params_bytes"].get<int64_t>(), 4 * psi);
  EXPECT_EQ(full["grads_bytes"].get<int64_t>(), 4 * psi);
  EXPECT_GT(full["peak_activation_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(full["optimizer_bytes"].get<int64_t>(), 8 * psi);
  EXPECT_EQ(shard["optimizer_bytes"].get<int64_t>(), 8 * ((psi + 3) / 4));
  EXPECT_EQ(shard["params_bytes"].get<int64_t>(), 4 * psi);
  EXPECT_EQ(shard["zero"].get<int>(), 1);

  // Each rank wrote its own shard file; the checkpoint resumes with 1 worker and no ZeRO,
  // and with 2 workers and ZeRO-1 (other shard boundaries), ending with the same weights.
  CommandResult inspect = RunLockstep({"inspect", four + "/checkpoints/step-00000004"});
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("in 4 files"), std::string::npos) << inspect.out;
  const std::string ckpt = four + "/checkpoints/step-00000004";
  const std::string to_one = TrainTiny("zero-to-one", kSteps, 4, With(kDet, {"--resume", ckpt}));
  EXPECT_EQ(DoneHash(to_one), DoneHash(one));
  const std::string to_two = TrainTiny("zero-to-two", kSteps, 4, With(kDet, {"--nproc", "2", "--zero", "1", "--resume", ckpt}));
  EXPECT_EQ(DoneHash(to_two), DoneHash(one));
  // And a replicated checkpoint loads into ZeRO-1.
  const std::string from_dp = TrainTiny("zero-from-dp", kSteps, 4,
                                        With(kDet, {"--nproc", "2", "--zero", "1", "--resume", one + "/checkpoints/step-00000004"}));
  EXPECT_EQ(DoneHash(from_dp), DoneHash(one));
}

// Default (non-deterministic) mode: sharding the update does not change a single bit
// relative to the replicated run with the same world size.
TEST(Zero1, DefaultModeEqualsTheReplicatedRun) {
  const std::string dp = TrainTiny("zero-dp2", kSteps, 4, {"--nproc", "2"});
  const std::string z1 = TrainTiny("zero-z2", kSteps, 4, {"--nproc", "2", "--zero", "1"});
  EXPECT_EQ(DoneHash(z1), DoneHash(dp));
}

TEST(Zero1, MpiTwoRanksMatchOneWorker) {
  const std::string one = TrainTiny("zero-mpi-one", kSteps, 4, kDet);
  const std::string mpi = TrainTiny("zero-mpi", kSteps, 4, With(kDet, {"--backend", "mpi", "--nproc", "2", "--zero", "1"}));
  EXPECT_EQ(DoneHash(mpi), DoneHash(one));
}

}  // namespace
}  // namespace lockstep::testing
