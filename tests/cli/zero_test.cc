// ZeRO stage 1: optimizer state sharded over the data-parallel ranks gives the
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

TEST(Zero1, MatchesOneWorkerAndShardsTheOptimizerState) {
  const std::string one = TrainTiny("zero-one", kSteps, 4, kDet);
  const std::string four = TrainTiny("zero-four", kSteps, 4, With(kDet, {"--nproc", "4", "--zero", "1"}));
  EXPECT_EQ(DoneHash(four), DoneHash(one));

  // Rank 0's AdamW moments: 8 bytes per element of its ceil(Ψ/4)-element shard, against 8Ψ.
  nlohmann::json full = LastMemoryRow(one), shard = LastMemoryRow(four);
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
  ExpectResumedAt(to_one, 4);
  const std::string to_two =
      TrainTiny("zero-to-two", kSteps, 4, With(kDet, {"--nproc", "2", "--zero", "1", "--resume", ckpt}));
  EXPECT_EQ(DoneHash(to_two), DoneHash(one));
  ExpectResumedAt(to_two, 4);
  // And a replicated checkpoint loads into ZeRO-1.
  const std::string from_dp =
      TrainTiny("zero-from-dp", kSteps, 4,
                With(kDet, {"--nproc", "2", "--zero", "1", "--resume", one + "/checkpoints/step-00000004"}));
  EXPECT_EQ(DoneHash(from_dp), DoneHash(one));
  ExpectResumedAt(from_dp, 4);
}

// Default (non-deterministic) mode: sharding the update does not change a single bit
// relative to the replicated run with the same world size.
TEST(Zero1, DefaultModeEqualsTheReplicatedRun) {
  const std::string dp = TrainTiny("zero-dp2", kSteps, 4, {"--nproc", "2"});
  const std::string z1 = TrainTiny("zero-z2", kSteps, 4, {"--nproc", "2", "--zero", "1"});
  EXPECT_EQ(DoneHash(z1), DoneHash(dp));
  EXPECT_EQ(WhatRan(z1), "dp=2,tp=1,pp=1 zero=1 world=2 threads");
}

TEST(Zero1, MpiTwoRanksMatchOneWorker) {
  const std::string one = TrainTiny("zero-mpi-one", kSteps, 4, kDet);
  const std::string mpi =
      TrainTiny("zero-mpi", kSteps, 4, With(kDet, {"--backend", "mpi", "--nproc", "2", "--zero", "1"}));
  EXPECT_EQ(DoneHash(mpi), DoneHash(one));
  EXPECT_EQ(WhatRan(mpi), "dp=2,tp=1,pp=1 zero=1 world=2 mpi");
}

// ZeRO-2 shards the gradients too, ZeRO-3 the parameters as well: the rank's persistent bytes
// are the paper's 4Ψ + 12Ψ/N and 16Ψ/N (with ceil(Ψ/N)-element shards), the weights stay those
// of one worker, and the shards resume elsewhere.
TEST(Zero23, ShardGradientsAndParametersAndMatchOneWorker) {
  const std::string one = TrainTiny("zero23-one", kSteps, 4, kDet);
  const int64_t psi = LastMemoryRow(one)["parameters"].get<int64_t>();
  const int64_t shard = (psi + 3) / 4;
  const std::string z2 = TrainTiny("zero23-z2", kSteps, 4, With(kDet, {"--nproc", "4", "--zero", "2"}));
  const std::string z3 = TrainTiny("zero23-z3", kSteps, 4, With(kDet, {"--nproc", "4", "--zero", "3"}));
  EXPECT_EQ(DoneHash(z2), DoneHash(one));
  EXPECT_EQ(DoneHash(z3), DoneHash(one));
  nlohmann::json m2 = LastMemoryRow(z2), m3 = LastMemoryRow(z3);
  EXPECT_EQ(m2["params_bytes"].get<int64_t>(), 4 * psi);
  EXPECT_EQ(m2["grads_bytes"].get<int64_t>(), 4 * shard);
  EXPECT_EQ(m2["optimizer_bytes"].get<int64_t>(), 8 * shard);
  EXPECT_EQ(m3["params_bytes"].get<int64_t>(), 4 * shard);
  EXPECT_EQ(m3["grads_bytes"].get<int64_t>(), 4 * shard);
  EXPECT_EQ(m3["optimizer_bytes"].get<int64_t>(), 8 * shard);
  const std::string ckpt = z3 + "/checkpoints/step-00000004";
  const std::string to_one = TrainTiny("zero23-to-one", kSteps, 4, With(kDet, {"--resume", ckpt}));
  EXPECT_EQ(DoneHash(to_one), DoneHash(one));
  ExpectResumedAt(to_one, 4);
  const std::string to_z2 =
      TrainTiny("zero23-to-z2", kSteps, 4, With(kDet, {"--nproc", "2", "--zero", "2", "--resume", ckpt}));
  EXPECT_EQ(DoneHash(to_z2), DoneHash(one));
  ExpectResumedAt(to_z2, 4);
}

// Default mode: reducing each unit's gradient to its owner adds the ranks' values in the same
// order as the allreduce does, so ZeRO-2/3 equal the replicated run bit for bit.
TEST(Zero23, DefaultModeEqualsTheReplicatedRun) {
  const std::string dp = TrainTiny("zero23-dp2", kSteps, 4, {"--nproc", "2"});
  for (const char* zero : {"2", "3"}) {
    const std::string z = TrainTiny("zero23-default", kSteps, 4, {"--nproc", "2", "--zero", zero});
    EXPECT_EQ(DoneHash(z), DoneHash(dp)) << "zero " << zero;
    EXPECT_EQ(WhatRan(z), std::string("dp=2,tp=1,pp=1 zero=") + zero + " world=2 threads");
  }
}

// The 10k test images end in a batch of 16 split over 2 workers of 32 rows each: rank 1's
// share is all padding. Under ZeRO-3 its forward still joins the parameter all-gathers (it
// once skipped the batch and rank 0 waited forever), and the validation loss is the
// replicated run's.
TEST(Zero23, AValidationShareOfOnlyPaddingStillJoinsTheGathers) {
  auto run = [](const std::string& prefix, const std::vector<std::string>& extra) {
    const std::string dir = MakeTempDir(prefix);
    std::vector<std::string> args = {"train", "--config", "configs/cnn-fashion.toml", "--nproc", "2", "--steps",
                                     "2",     "--set",    "train.threads=1",          "--out",   dir};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = RunLockstep(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<nlohmann::json> evals;
    for (const std::string& l : ReadLines(dir + "/metrics.jsonl"))
      if (auto j = nlohmann::json::parse(l); j.contains("val_loss")) evals.push_back(j);
    EXPECT_EQ(evals.size(), 1u) << prefix;
    return evals.empty() ? std::string() : evals[0]["val_loss"].dump();
  };
  const std::string z3 = run("zero3-eval-pad", {"--zero", "3", "--set", "eval.batches=0"});
  EXPECT_FALSE(z3.empty());
  EXPECT_EQ(z3, run("zero0-eval-pad", {"--set", "eval.batches=0"}));
}

// --mem-limit: a limit the unsharded model states cannot fit is refused up front (exit 2, one
// line saying what does not fit); ZeRO-3 over 4 workers trains under the same limit, and the
// limit changes nothing about the arithmetic: the same run without it ends with the same hash.
TEST(MemLimit, RefusesWhatDoesNotFitAndZero3TrainsUnderIt) {
  auto args_for = [](const std::string& out, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"train", "--config", "configs/gpt-tiny.toml", "--steps", "2", "--out",
                                     out,     "--set",    "eval.batches=1"};
    for (const char* kv :
         {"train.batch_size=8", "model.context=32", "model.width=128", "model.layers=4", "model.heads=4"})
      args.insert(args.end(), {"--set", kv});
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  CommandResult refused = RunLockstep(args_for(MakeTempDir("memlimit-refused"), {"--mem-limit", "13M"}));
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--mem-limit 13.0 MiB: worker 0 needs "), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("optimizer 6.6 MiB"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(", activations "), std::string::npos) << refused.err;
  const std::string limited = MakeTempDir("memlimit-z3"), free = MakeTempDir("memlimit-free");
  CommandResult fits = RunLockstep(args_for(limited, {"--nproc", "4", "--zero", "3", "--mem-limit", "13M"}));
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  CommandResult unlimited = RunLockstep(args_for(free, {"--nproc", "4", "--zero", "3"}));
  EXPECT_EQ(unlimited.exit_code, 0) << unlimited.err;
  EXPECT_EQ(DoneHash(limited).size(), 16u);
  EXPECT_EQ(DoneHash(limited), DoneHash(free));
  // And it really ran under the limit: every rank's memory rows say so, and what they held.
  int ranks_seen = 0;
  for (const nlohmann::json& row : Events(limited, "memory")) {
    EXPECT_EQ(row["mem_limit"].get<int64_t>(), 13 << 20) << row.dump();
    EXPECT_LE(row["peak_bytes"].get<int64_t>(), 13 << 20) << row.dump();
    ranks_seen |= 1 << row["rank"].get<int>();
  }
  EXPECT_EQ(ranks_seen, 0b1111);
}

}  // namespace
}  // namespace lockstep::testing
