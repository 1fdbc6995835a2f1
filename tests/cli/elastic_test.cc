// Elastic recovery: a worker lost for good (--inject-fault ...:permanent, which
// kills its rank again in every attempt that still has it) and --min-nproc M. The supervisor
// restarts once at the same size; when that fails again before a new checkpoint it goes on
// with the largest smaller world the plan allows, from the newest valid checkpoint. With
// --deterministic the weights equal the uninterrupted run at the original size. The faults
// are real SIGKILLs of the real training process.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kSteps = 16;
const std::string kLost = "kill:rank=3:step=12:permanent";

std::vector<std::string> Args(const std::string& out, std::vector<std::string> extra) {
  return TinyTrainArgs(out, kSteps, 4, extra);
}

// The world size of the attempt that finished: the last start line names it.
int LastWorld(const std::string& err) {
  const size_t at = err.rfind(" worker(s)");
  if (at == std::string::npos) return 0;
  const size_t begin = err.rfind(' ', at - 1);
  return std::stoi(err.substr(begin + 1, at - begin - 1));
}

size_t Lines(const std::string& s, const std::string& containing) {
  size_t n = 0, at = 0;
  while ((at = s.find(containing, at)) != std::string::npos) ++n, at += containing.size();
  return n;
}

// The case to hold: 4 workers, rank 3 lost at step 12, --min-nproc 2, deterministic. 3
// workers cannot split train.det_shards = 8, so the run goes on with 2, and ends with the
// weights of the 4-worker run that never failed. Synchronous saves, so the kill at step 12
// always finds step 8's checkpoint committed (an async one still in flight under load gave
// the retry a checkpoint to make, and a third restart: CI failed once on that).
// The timing these tests rely on: checkpoint.async=false really made every save synchronous.
void ExpectSynchronousCheckpoints(const std::string& dir) {
  const std::vector<nlohmann::json> saves = Events(dir, "checkpoint");
  EXPECT_FALSE(saves.empty());
  for (const nlohmann::json& c : saves) EXPECT_FALSE(c["async"].get<bool>()) << c.dump();
}

TEST(Elastic, RankLostForGoodFinishesOnTwoWithTheFourWorkerHash) {
  const std::vector<std::string> four = {"--nproc", "4", "--deterministic"};
  const std::string want = DoneHash(TrainTiny("el-full", kSteps, 4, four));
  const std::string dir = MakeTempDir("el-lost");
  std::vector<std::string> extra = four;
  extra.insert(extra.end(),
               {"--max-restarts", "4", "--min-nproc", "2", "--inject-fault", kLost, "--set", "checkpoint.async=false"});
  CommandResult r = RunLockstep(Args(dir, extra));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(DoneHash(dir), want) << r.err;
  auto changed = Events(dir, "world_changed");
  ASSERT_EQ(changed.size(), 1u) << r.err;
  EXPECT_EQ(changed[0]["from"], 4);
  EXPECT_EQ(changed[0]["to"], 2);
  EXPECT_NE(changed[0]["reason"].get<std::string>().find("failed again before a new checkpoint"), std::string::npos);
  // The restart at the same size came first (the rank died twice), then the smaller world.
  EXPECT_EQ(Events(dir, "restart").size(), 2u) << r.err;
  EXPECT_EQ(Lines(r.err, "injected fault: SIGKILL to rank 3"), 2u) << r.err;
  EXPECT_NE(r.err.find("supervisor: world 4 -> 2 workers from step " + std::to_string(changed[0]["step"].get<int>())),
            std::string::npos)
      << r.err;
  EXPECT_EQ(LastWorld(r.err), 2) << r.err;
  ExpectEachStepOnce(dir, kSteps);
  EXPECT_EQ(changed[0]["step"], 8);  // the synchronous checkpoint of step 8, before the kill at 12
  ExpectResumedAt(dir, 8);
  ExpectSynchronousCheckpoints(dir);
}

// Without --deterministic a batch of 12 splits over 3 workers: the run goes on with 3 and
// says that its numbers now follow the smaller world.
TEST(Elastic, DefaultModeGoesOnWithThreeAndSaysSo) {
  const std::string dir = MakeTempDir("el-default");
  CommandResult r = RunLockstep(Args(dir, {"--nproc", "4", "--set", "train.batch_size=12", "--max-restarts", "4",
                                           "--min-nproc", "2", "--inject-fault", kLost}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(DoneHash(dir).size(), 16u);
  auto changed = Events(dir, "world_changed");
  ASSERT_EQ(changed.size(), 1u) << r.err;
  EXPECT_EQ(changed[0]["to"], 3);
  EXPECT_NE(
      r.err.find("numbers from step " + std::to_string(changed[0]["step"].get<int>()) + " on follow a 3-worker run"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(LastWorld(r.err), 3) << r.err;
  ExpectEachStepOnce(dir, kSteps);
}

// --min-nproc 4: losing a worker ends the run with one line naming the lost capacity and
// exit status 4; `latest` still names a checkpoint that verifies, and resuming from it on 4
// workers finishes with the uninterrupted weights.
TEST(Elastic, BelowMinNprocStopsWithOneLineAndLatestIntact) {
  const std::vector<std::string> four = {"--nproc", "4", "--deterministic"};
  const std::string dir = MakeTempDir("el-floor");
  std::vector<std::string> extra = four;
  extra.insert(extra.end(), {"--max-restarts", "4", "--min-nproc", "4", "--inject-fault", kLost});
  CommandResult r = RunLockstep(Args(dir, extra));
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_EQ(Lines(r.err, "error:"), 1u) << r.err;
  EXPECT_NE(r.err.find("error: lost 1 of 4 workers"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3 workers left, below --min-nproc 4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is intact"), std::string::npos) << r.err;
  EXPECT_EQ(DoneHash(dir), "");
  EXPECT_TRUE(Events(dir, "world_changed").empty());
  CommandResult inspect = RunLockstep({"inspect", dir + "/checkpoints"});
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("shards ok"), std::string::npos) << inspect.out;
  extra = four;
  extra.insert(extra.end(), {"--resume", "auto"});
  CommandResult resumed = RunLockstep(Args(dir, extra));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  ExpectResumedAt(dir, 8);  // rank 3 died in step 12, before its checkpoint
  EXPECT_EQ(DoneHash(dir), DoneHash(TrainTiny("el-full", kSteps, 4, four)));
}

// A tensor-parallel factor is never shrunk: tp=4 on 4 workers that lose one is refused with
// the reason (said up front as a warning, and again when it happens), not hung.
TEST(Elastic, LayoutThatCannotShrinkIsRefused) {
  const std::string dir = MakeTempDir("el-tp4");
  CommandResult r =
      RunLockstep(Args(dir, {"--nproc", "4", "--layout", "tp=4", "--set", "model.heads=4", "--deterministic",
                             "--max-restarts", "4", "--min-nproc", "2", "--inject-fault", kLost}));
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_NE(r.err.find("warning: losing a worker will end this run"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error: lost 1 of 4 workers"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tp=4,pp=1 needs a multiple of 4 workers"), std::string::npos) << r.err;
  EXPECT_TRUE(Events(dir, "world_changed").empty());
}

// --max-nproc 4: at a checkpoint boundary the world grows back to 4 (the lost workers return
// on probation); rank 3 dies again before the grown world's first checkpoint, and the world
// shrinks again at once, without a same-size retry. Losses and returns alternate, and the
// weights are still the uninterrupted run's.
TEST(Elastic, GrowsBackAtCheckpointsAndStillMatches) {
  // A larger model than the tiny default: the supervisor looks for new checkpoints every 100 ms,
  // so the 2-worker run must still be training well after step 8's commit for the world to grow
  // there (the tiny model finished all 24 steps in about that time, and the test was flaky).
  const std::vector<std::string> four = {"--nproc",         "4",     "--deterministic", "--set",
                                         "model.layers=2",  "--set", "model.width=128", "--set",
                                         "model.context=64"};
  constexpr int kLongSteps = 24;
  const std::string want = DoneHash(TrainTiny("el-grow-full", kLongSteps, 4, four));
  const std::string dir = MakeTempDir("el-grow");
  std::vector<std::string> extra = four;
  // Synchronous checkpoints: each boundary is committed before the next step, so the kill at
  // step 6 always finds step 4's (an async write could still be in flight under load).
  extra.insert(extra.end(), {"--max-restarts", "20", "--min-nproc", "2", "--max-nproc", "4", "--inject-fault",
                             "kill:rank=3:step=6:permanent", "--set", "checkpoint.async=false"});
  CommandResult r = RunLockstep(TinyTrainArgs(dir, kLongSteps, 4, extra));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(DoneHash(dir), want) << r.err;
  auto changed = Events(dir, "world_changed");
  ASSERT_GE(changed.size(), 3u) << r.err;  // 4 -> 2, 2 -> 4 at a checkpoint, 4 -> 2 again
  for (size_t i = 0; i < changed.size(); ++i) {
    EXPECT_EQ(changed[i]["from"], i % 2 == 0 ? 4 : 2) << changed[i].dump();
    EXPECT_EQ(changed[i]["to"], i % 2 == 0 ? 2 : 4) << changed[i].dump();
  }
  EXPECT_NE(changed[1]["reason"].get<std::string>().find("up to --max-nproc 4"), std::string::npos);
  EXPECT_GT(changed[1]["step"].get<int64_t>(), 0);
  EXPECT_EQ(changed[1]["step"].get<int64_t>() % 4, 0);  // a checkpoint boundary
  EXPECT_NE(changed[2]["reason"].get<std::string>().find("the grown world failed before its first checkpoint"),
            std::string::npos);
  // Growing is no failure: after the first shrink, the only restarts are the grown worlds lost.
  size_t restarts_after = 0;
  bool after = false;
  for (const std::string& l : ReadLines(dir + "/metrics.jsonl")) {
    auto j = nlohmann::json::parse(l);
    after = after || j.value("event", "") == "world_changed";
    restarts_after += after && j.value("event", "") == "restart";
  }
  EXPECT_EQ(restarts_after, (changed.size() - 1) / 2) << r.err;
  EXPECT_EQ(Lines(std::string(ReadLines(dir + "/metrics.jsonl").back()), "\"event\":\"done\""), 1u);
  ExpectSynchronousCheckpoints(dir);
}

// Flags that cannot work are bad input: one line, exit 2, nothing started.
TEST(Elastic, BadElasticFlagsAreOneLine) {
  const std::string dir = MakeTempDir("el-bad");
  struct Case {
    std::vector<std::string> flags;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"--min-nproc", "2"}, "--min-nproc changes the world on a restart: it needs --max-restarts R"},
           {{"--max-restarts", "1", "--min-nproc", "5"}, "--min-nproc 5: expected 1..4 (--nproc)"},
           {{"--max-restarts", "1", "--max-nproc", "8"}, "--max-nproc needs --min-nproc"},
           {{"--max-restarts", "1", "--min-nproc", "2", "--max-nproc", "3"}, "--max-nproc 3 is below --nproc 4"},
           {{"--hosts", "a:2,b:3"}, "every host needs the same number of workers with one process a host"},
           {{"--workers-per-host", "3"}, "--nproc 4 is not a multiple of --workers-per-host 3"},
           {{"--backend", "mpi", "--workers-per-host", "2"}, "--workers-per-host runs threads in each host"},
           {{"--workers-per-host", "2", "--layout", "tp=4"}, "would split a tensor-parallel group across hosts"},
           {{"--backend", "mpi", "--hosts", "a:2,a:2"}, "host 'a' is listed twice"},
           {{"--backend", "mpi", "--hosts", "a:0"}, "slots must be a positive integer"},
           {{"--inject-fault", "hang:rank=1:step=3:permanent"}, "unexpected field 'permanent'"},
       }) {
    std::vector<std::string> flags = {"--nproc", "4"};
    flags.insert(flags.end(), c.flags.begin(), c.flags.end());
    CommandResult r = RunLockstep(Args(dir, flags));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(Lines(r.err, "\n"), 1u) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace lockstep::testing
