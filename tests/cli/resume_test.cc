// Resuming from checkpoints: a run resumed from its step-4 checkpoint ends with the
// weights of the run that never stopped, on the same or another world size (deterministic
// mode), and its metrics.jsonl holds each step once; checkpoints of another configuration are
// refused; --resume auto skips a corrupt newest checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kSteps = 8;

std::vector<std::string> Flags(const std::string& out, std::vector<std::string> extra) {
  return TinyTrainArgs(out, kSteps, 4, extra);
}

// Trains kSteps into a fresh directory; returns it.
std::string Uninterrupted(std::vector<std::string> extra) { return TrainTiny("resume-full", kSteps, 4, extra); }

std::string Step4(const std::string& run) { return run + "/checkpoints/step-00000004"; }

// Resumes from the step-4 checkpoint of `run` into a fresh directory; returns it.
std::string ResumeFromStep4(const std::string& run, std::vector<std::string> extra) {
  std::string dir = MakeTempDir("resume-part");
  extra.push_back("--resume");
  extra.push_back(Step4(run));
  CommandResult r = RunLockstep(Flags(dir, extra));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resumed from " + Step4(run)), std::string::npos) << r.err;
  ExpectResumedAt(dir, 4);
  return dir;
}

std::vector<int64_t> TrainingSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  for (const std::string& l : ReadLines(dir + "/metrics.jsonl")) {
    auto j = nlohmann::json::parse(l);
    if (j.contains("loss")) steps.push_back(j["step"].get<int64_t>());
  }
  return steps;
}

TEST(Resume, SameWeightsAsTheUninterruptedRun) {
  std::string full = Uninterrupted({});
  std::string resumed = ResumeFromStep4(full, {});
  EXPECT_EQ(DoneHash(resumed), DoneHash(full));
  // Two workers, default (non-deterministic) mode: still exact, the sum order is fixed.
  std::string full2 = Uninterrupted({"--nproc", "2"});
  EXPECT_EQ(DoneHash(ResumeFromStep4(full2, {"--nproc", "2"})), DoneHash(full2));
}

// A checkpoint written by 2 workers resumes on 1 and on 4 (deterministic mode makes the
// weights independent of the world size, so all three end equal).
TEST(Resume, AcrossWorldSizesInDeterministicMode) {
  std::string full = Uninterrupted({"--deterministic", "--nproc", "2"});
  EXPECT_EQ(DoneHash(ResumeFromStep4(full, {"--deterministic", "--nproc", "1"})), DoneHash(full));
  EXPECT_EQ(DoneHash(ResumeFromStep4(full, {"--deterministic", "--nproc", "4"})), DoneHash(full));
}

// The resumed run's own directory continues the interrupted one: rows of steps after the
// checkpoint (lost work) are dropped, so every step appears exactly once.
TEST(Resume, AutoInPlaceKeepsEachMetricsRowOnce) {
  std::string full = Uninterrupted({});
  std::string dir = MakeTempDir("resume-auto");
  CommandResult first = RunLockstep(Flags(dir, {}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // Pretend the run died after step 6: `latest` back to step 4, step 8 gone, and rows up to 6.
  std::filesystem::remove_all(dir + "/checkpoints/step-00000008");
  { std::ofstream(dir + "/checkpoints/latest", std::ios::trunc) << "step-00000004"; }
  std::vector<std::string> lines = ReadLines(dir + "/metrics.jsonl");
  {
    std::ofstream out(dir + "/metrics.jsonl", std::ios::trunc);
    for (const std::string& l : lines)
      if (nlohmann::json::parse(l).value("step", 0) <= 6) out << l << "\n";
    out << "{\"step\": 7, \"loss\": 1.0, \"tor";  // a row torn by the crash
  }
  CommandResult r = RunLockstep(Flags(dir, {"--resume", "auto"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectResumedAt(dir, 4);
  EXPECT_EQ(DoneHash(dir), DoneHash(full));
  std::vector<int64_t> want;
  for (int s = 1; s <= kSteps; ++s) want.push_back(s);
  EXPECT_EQ(TrainingSteps(dir), want);
}

TEST(Resume, AutoSkipsACorruptNewestCheckpoint) {
  std::string full = Uninterrupted({});
  std::string dir = MakeTempDir("resume-corrupt");
  std::filesystem::copy(full + "/checkpoints", dir + "/checkpoints", std::filesystem::copy_options::recursive);
  const std::string shard = dir + "/checkpoints/step-00000008/rank-00000.safetensors";
  ASSERT_TRUE(std::filesystem::exists(shard));
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  CommandResult r = RunLockstep(Flags(dir, {"--resume", "auto"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("skipping checkpoint"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("step-00000008"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("resumed from " + dir + "/checkpoints/step-00000004"), std::string::npos) << r.err;
  ExpectResumedAt(dir, 4);
  EXPECT_EQ(DoneHash(dir), DoneHash(full));
}

TEST(Resume, RefusesACheckpointOfAnotherConfiguration) {
  std::string full = Uninterrupted({});
  std::string dir = MakeTempDir("resume-foreign");
  CommandResult r = RunLockstep(Flags(dir, {"--set", "optim.lr=0.5", "--resume", Step4(full)}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("foreign checkpoint"), std::string::npos) << r.err;
  // Thread counts and step counts are not part of the identity: extending the run works, to the
  // same weights in deterministic mode (the mode that makes the bits independent of the thread
  // count: in the default one, oneDNN's AVX2 GEMM splits its sums by thread).
  const std::string det = Uninterrupted({"--deterministic"});
  CommandResult ok = RunLockstep(Flags(dir, {"--deterministic", "--set", "train.threads=1", "--resume", Step4(det)}));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  ExpectResumedAt(dir, 4);
  EXPECT_EQ(DoneHash(dir), DoneHash(det));
}

TEST(Resume, MissingOrCorruptExplicitCheckpointIsAnError) {
  std::string dir = MakeTempDir("resume-missing");
  CommandResult r = RunLockstep(Flags(dir, {"--resume", dir + "/nope"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(dir + "/nope"), std::string::npos) << r.err;
  // A checkpoint named explicitly is that one or nothing: a damaged step 8 is an error naming
  // its shard, not a quiet resume from the older step 4 (which --resume auto would choose).
  const std::string full = Uninterrupted({});
  const std::string shard = full + "/checkpoints/step-00000008/rank-00000.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  const std::string out = MakeTempDir("resume-corrupt-explicit");
  CommandResult c = RunLockstep(Flags(out, {"--resume", full + "/checkpoints/step-00000008"}));
  EXPECT_NE(c.exit_code, 0) << c.err;
  EXPECT_NE(c.err.find(shard), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("checksum mismatch"), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find("resumed from"), std::string::npos) << c.err;
  EXPECT_EQ(DoneHash(out), "");
}

}  // namespace
}  // namespace lockstep::testing
