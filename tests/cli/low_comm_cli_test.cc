// train.sync = "diloco" and train.grad_compression = "powersgd" end to end (docs/low-communication.md):
// DiLoCo with one inner step, outer lr 1, momentum 0 and SGD is synchronous SGD; runs killed or
// resumed mid-window end with the uninterrupted run's weights; deterministic PowerSGD gives the
// same weights on 1, 2 and 4 workers and resumes across world sizes; comm_bytes shows the
// bytes each saves; bad settings get one line and exit 2.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

std::vector<nlohmann::json> TrainingRows(const std::string& dir) {
  std::vector<nlohmann::json> rows;
  for (const std::string& l : ReadLines(dir + "/metrics.jsonl")) {
    auto j = nlohmann::json::parse(l);
    if (j.contains("loss")) rows.push_back(j);
  }
  return rows;
}

int64_t TotalCommBytes(const std::string& dir) {
  int64_t total = 0;
  for (const nlohmann::json& r : TrainingRows(dir)) total += r["comm_bytes"].get<int64_t>();
  return total;
}

void ExpectBadSetting(const std::vector<std::string>& extra, const std::string& needle);

std::string ResumeFrom(const std::string& run, int step, int steps, std::vector<std::string> extra) {
  const std::string dir = MakeTempDir("lowcomm-resumed");
  char name[32];
  std::snprintf(name, sizeof(name), "/checkpoints/step-%08d", step);
  extra.push_back("--resume");
  extra.push_back(run + name);
  CommandResult r = RunLockstep(TinyTrainArgs(dir, steps, 2, extra));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectResumedAt(dir, step);
  return dir;
}

const std::vector<std::string> kSgd = {"--set", "optim.name=sgd", "--set", "optim.grad_clip=0",
                                       "--set", "optim.lr=0.5"};

TEST(Diloco, OneInnerStepWithOuterLrOneAndNoMomentumIsSynchronousSgd) {
  std::vector<std::string> sync = kSgd;
  sync.insert(sync.end(), {"--nproc", "2"});
  std::vector<std::string> diloco = sync;
  diloco.insert(diloco.end(), {"--set", "train.sync=diloco", "--set", "train.diloco_inner_steps=1", "--set",
                               "train.diloco_outer_lr=1", "--set", "train.diloco_outer_momentum=0"});
  const std::string a = TrainTiny("lowcomm-sync", 6, 0, sync), b = TrainTiny("lowcomm-diloco1", 6, 0, diloco);
  const auto ra = TrainingRows(a), rb = TrainingRows(b);
  ASSERT_EQ(ra.size(), 6u);
  ASSERT_EQ(rb.size(), 6u);
  // The same update up to rounding: theta - (theta - (theta - lr g_i)) averaged is not
  // bit-exact, so each loss agrees to float precision rather than bit for bit.
  for (size_t i = 0; i < ra.size(); ++i)
    EXPECT_NEAR(rb[i]["loss"].get<double>(), ra[i]["loss"].get<double>(), 2e-5) << "step " << i + 1;
  EXPECT_NE(DoneHash(a), "");
}

TEST(Diloco, KilledAndResumedMidWindowEndWithTheUninterruptedWeights) {
  const std::vector<std::string> extra = {"--nproc", "2",
                                          "--set",   "train.sync=diloco",
                                          "--set",   "train.diloco_inner_steps=3",
                                          "--set",   "train.diloco_fragments=1"};
  const std::string full = TrainTiny("lowcomm-diloco-full", 8, 2, extra);
  // Step 4 is inside the second window (synchronisations after steps 3 and 6).
  EXPECT_EQ(DoneHash(ResumeFrom(full, 4, 8, extra)), DoneHash(full));
  // A worker killed with SIGKILL at step 6; the supervisor restarts from step 4's checkpoint.
  std::vector<std::string> killed = extra;
  killed.insert(killed.end(), {"--max-restarts", "2", "--inject-fault", "kill:rank=1:step=6"});
  const std::string dir = MakeTempDir("lowcomm-diloco-kill");
  CommandResult r = RunLockstep(TinyTrainArgs(dir, 8, 2, killed));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(ExpectResumedAt(dir, -1), 2);
  EXPECT_EQ(DoneHash(dir), DoneHash(full));
  // Only the synchronising steps send anything: 3, 6 and the last.
  for (const nlohmann::json& row : TrainingRows(full)) {
    const int64_t step = row["step"];
    EXPECT_EQ(row["comm_bytes"].get<int64_t>() > 0, step == 3 || step == 6 || step == 8) << "step " << step;
  }
}

// Streaming DiLoCo on 2 deterministic replicas of a 2-block model: H = 4, two fragments,
// the outer gradient as `dtype`, then `more`.
std::vector<std::string> StreamingDiloco(const std::string& dtype, const std::vector<std::string>& more = {}) {
  std::vector<std::string> args = {"--nproc",
                                   "2",
                                   "--deterministic",
                                   "--set",
                                   "train.sync=diloco",
                                   "--set",
                                   "model.layers=2",
                                   "--set",
                                   "train.diloco_inner_steps=4",
                                   "--set",
                                   "train.diloco_fragments=2",
                                   "--set",
                                   "train.diloco_outer_dtype=" + dtype};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(Diloco, StreamingFragmentsResumeExactlyInDeterministicMode) {
  const std::vector<std::string> extra = StreamingDiloco("bf16");
  const std::string full = TrainTiny("lowcomm-stream-full", 8, 2, extra);
  EXPECT_EQ(DoneHash(ResumeFrom(full, 6, 8, extra)), DoneHash(full));
  EXPECT_EQ(DoneHash(TrainTiny("lowcomm-stream-again", 8, 2, extra)), DoneHash(full));
  // Two host processes of one worker each (the hierarchical backend's launch): the same bits.
  std::vector<std::string> hier = extra;
  hier.insert(hier.end(), {"--workers-per-host", "1"});
  EXPECT_EQ(DoneHash(TrainTiny("lowcomm-stream-hier", 8, 2, hier)), DoneHash(full));
}

// Replicas split by tensor and pipeline parallelism: each rank keeps the anchor and momentum
// of its shard, and a replica clips by its whole gradient's norm (summed over its tp and pp
// ranks). In deterministic mode that is the trajectory of whole replicas, and a checkpoint
// taken mid-window resumes in another layout.
TEST(Diloco, ModelParallelReplicasMatchWholeReplicasAndResumeAcrossLayouts) {
  const std::vector<std::string> diloco = {
      "--deterministic", "--set",         "train.sync=diloco", "--set", "train.diloco_inner_steps=3",
      "--set",           "model.layers=2"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.end(), diloco.begin(), diloco.end());
    return more;
  };
  const std::string whole = TrainTiny("lowcomm-diloco-dp2", 8, 2, with({"--nproc", "2"}));
  ASSERT_EQ(DoneHash(whole).size(), 16u);
  const std::string split = TrainTiny("lowcomm-diloco-tp2", 8, 2, with({"--nproc", "4", "--layout", "tp=2,dp=2"}));
  EXPECT_EQ(DoneHash(split), DoneHash(whole));
  EXPECT_EQ(DoneHash(TrainTiny("lowcomm-diloco-pp2", 8, 2, with({"--nproc", "4", "--layout", "pp=2,dp=2"}))),
            DoneHash(whole));
  EXPECT_EQ(DoneHash(TrainTiny("lowcomm-diloco-tp2pp2", 8, 2, with({"--nproc", "8", "--layout", "tp=2,pp=2,dp=2"}))),
            DoneHash(whole));
  // Step 4 is inside the second window: tp=2 -> whole replicas, and whole -> tp=2.
  EXPECT_EQ(DoneHash(ResumeFrom(split, 4, 8, with({"--nproc", "2"}))), DoneHash(whole));
  EXPECT_EQ(DoneHash(ResumeFrom(whole, 4, 8, with({"--nproc", "4", "--layout", "tp=2,dp=2"}))), DoneHash(whole));
}

// Elastic DiLoCo: a worker lost for good, the run goes on with the replicas of the largest world
// left (3 workers cannot split det_shards = 8: 2), each from its own state in the newest
// checkpoint: the weights of a run resumed from that checkpoint by hand on 2 workers. Growing
// is refused (a new replica would have no inner state).
TEST(Diloco, ElasticRunShrinksToTheReplicasLeftAsAResumeWouldAndDoesNotGrow) {
  const std::vector<std::string> diloco = {
      "--deterministic",       "--set", "train.sync=diloco", "--set", "train.diloco_inner_steps=3", "--set",
      "checkpoint.async=false"};
  std::vector<std::string> lost = diloco;
  lost.insert(lost.end(), {"--nproc", "4", "--max-restarts", "4", "--min-nproc", "2", "--inject-fault",
                           "kill:rank=3:step=10:permanent"});
  const std::string dir = MakeTempDir("lowcomm-diloco-elastic");
  CommandResult r = RunLockstep(TinyTrainArgs(dir, 12, 4, lost));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<nlohmann::json> changed;
  for (const std::string& l : ReadLines(dir + "/metrics.jsonl")) {
    auto j = nlohmann::json::parse(l);
    if (j.value("event", "") == "world_changed") changed.push_back(j);
  }
  ASSERT_EQ(changed.size(), 1u) << r.err;
  EXPECT_EQ(changed[0]["to"], 2);
  ASSERT_EQ(DoneHash(dir).size(), 16u) << r.err;
  const int step = changed[0]["step"];
  EXPECT_NE(r.err.find("DiLoCo goes on from step " + std::to_string(step) + " with the replicas of a 2-worker world"),
            std::string::npos)
      << r.err;
  std::vector<std::string> two = diloco;
  two.insert(two.end(), {"--nproc", "2"});
  EXPECT_EQ(DoneHash(ResumeFrom(dir, step, 12, two)), DoneHash(dir));

  std::vector<std::string> grow = diloco;
  grow.insert(grow.end(), {"--nproc", "2", "--max-restarts", "1", "--min-nproc", "2", "--max-nproc", "4"});
  ExpectBadSetting(grow, "a DiLoCo run (train.sync = \"diloco\") shrinks to the replicas left but does not grow");
}

// Streaming DiLoCo with overlap: fragment 0's exchange starts after step 6 and lands after
// step 7, so step 6's checkpoint holds a delta in flight; resumed there (and at steps without
// one), the run ends with the uninterrupted weights, for fp32 and bf16 on the wire.
TEST(Diloco, OverlappedExchangesInFlightAtACheckpointResumeExactly) {
  for (const char* dtype : {"fp32", "bf16"}) {
    const std::vector<std::string> extra =
        StreamingDiloco(dtype, {"--set", "train.diloco_overlap_steps=1", "--set", "train.diloco_merge_alpha=0.5",
                                "--set", "checkpoint.keep=10"});
    const std::string full = TrainTiny("lowcomm-overlap-full", 10, 2, extra);
    ASSERT_EQ(DoneHash(full).size(), 16u);
    for (int step : {4, 6, 8}) EXPECT_EQ(DoneHash(ResumeFrom(full, step, 10, extra)), DoneHash(full)) << dtype << step;
    // Overlap changes the trajectory (the fragment lands a step late): not the blocking run's bits.
    std::vector<std::string> blocking = extra;
    blocking.insert(blocking.end(), {"--set", "train.diloco_overlap_steps=0"});
    EXPECT_NE(DoneHash(TrainTiny("lowcomm-overlap-blocking", 10, 2, blocking)), DoneHash(full)) << dtype;
  }
}

TEST(PowerSgd, DeterministicWeightsDoNotDependOnTheWorldSizeAndResumeAcrossIt) {
  const std::vector<std::string> psgd = {"--deterministic",       "--set", "train.grad_compression=powersgd", "--set",
                                         "train.powersgd_rank=2", "--set", "train.powersgd_start_step=2"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), psgd.begin(), psgd.end());
    return more;
  };
  const std::string one = TrainTiny("lowcomm-psgd-1", 8, 2, with({}));
  const std::string two = TrainTiny("lowcomm-psgd-2", 8, 2, with({"--nproc", "2"}));
  const std::string four = TrainTiny("lowcomm-psgd-4", 8, 2, with({"--nproc", "4"}));
  EXPECT_EQ(DoneHash(two), DoneHash(one));
  EXPECT_EQ(DoneHash(four), DoneHash(one));
  EXPECT_EQ(DoneHash(ResumeFrom(two, 4, 8, with({"--nproc", "4"}))), DoneHash(one));
  // The hierarchical backend (2 host processes of 2 worker threads): the same weights.
  const std::string hier = TrainTiny("lowcomm-psgd-hier", 8, 2, with({"--nproc", "4", "--workers-per-host", "2"}));
  EXPECT_EQ(DoneHash(hier), DoneHash(one));
  EXPECT_EQ(Events(hier, "start").at(0)["backend"], "hier");
  // Not the uncompressed run: compression changed the trajectory.
  EXPECT_NE(DoneHash(TrainTiny("lowcomm-plain-1", 8, 2, {"--deterministic"})), DoneHash(one));
}

TEST(PowerSgd, ResumesExactlyAndSendsFewerBytesThanSynchronousDataParallelism) {
  const std::vector<std::string> extra = {"--nproc", "2",
                                          "--set",   "train.grad_compression=powersgd",
                                          "--set",   "train.powersgd_rank=1",
                                          "--set",   "train.powersgd_start_step=0"};
  const std::string full = TrainTiny("lowcomm-psgd-full", 8, 2, extra);
  EXPECT_EQ(DoneHash(ResumeFrom(full, 4, 8, extra)), DoneHash(full));
  const std::string plain = TrainTiny("lowcomm-plain-2", 8, 2, {"--nproc", "2"});
  EXPECT_GT(TotalCommBytes(full), 0);
  EXPECT_LT(TotalCommBytes(full) * 4, TotalCommBytes(plain));
}

void ExpectBadSetting(const std::vector<std::string>& extra, const std::string& needle) {
  std::vector<std::string> args = TinyTrainArgs(MakeTempDir("lowcomm-bad"), 2, 0, extra);
  CommandResult r = RunLockstep(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(LowCommunication, BadSettingsAreOneLineAndExitTwo) {
  ExpectBadSetting({"--set", "train.grad_compression=powersgd", "--set", "train.powersgd_rank=0"}, "powersgd_rank");
  ExpectBadSetting({"--set", "train.grad_compression=powersgd", "--set", "train.powersgd_rank=500"},
                   "powersgd_rank = 500 is too large");
  ExpectBadSetting({"--set", "train.sync=diloco", "--set", "train.diloco_inner_steps=0"}, "diloco_inner_steps");
  ExpectBadSetting({"--set", "train.sync=diloco", "--set", "train.diloco_fragments=3"},
                   "more than the model's 1 blocks");
  ExpectBadSetting({"--nproc", "2", "--zero", "1", "--set", "train.sync=diloco"}, "not ZeRO-sharded");
  ExpectBadSetting({"--nproc", "2", "--layout", "tp=2", "--set", "train.grad_compression=powersgd"},
                   "whole data-parallel replicas");
  ExpectBadSetting({"--set", "train.sync=sometimes"}, "train.sync");
  ExpectBadSetting(
      {"--set", "train.sync=diloco", "--set", "train.diloco_inner_steps=4", "--set", "train.diloco_overlap_steps=4"},
      "'train.diloco_overlap_steps' must be in [0, diloco_inner_steps - 1 = 3], got 4");
  ExpectBadSetting({"--set", "train.sync=diloco", "--set", "train.diloco_merge_alpha=2"},
                   "'train.diloco_merge_alpha' must be in [0, 1], got 2");
  ExpectBadSetting({"--set", "train.sync=diloco", "--set", "train.grad_compression=powersgd"}, "do not combine");
  // A single replica: a warning, and the run goes on.
  const std::string dir = MakeTempDir("lowcomm-single");
  CommandResult r = RunLockstep(TinyTrainArgs(dir, 2, 0, {"--set", "train.sync=diloco"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("single replica is plain training"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lockstep::testing
