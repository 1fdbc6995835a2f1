// Supervised restarts and fault injection: a worker SIGKILLed at a random step, one
// killed while its checkpoint is being written, and one that hangs are each detected, the job
// restarted from `latest`, and the run ends with the weights of a run that never failed. The
// faults are real SIGKILLs (and a real hang) of real processes.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kSteps = 8;

std::vector<std::string> Flags(const std::string& out, std::vector<std::string> extra) {
  return TinyTrainArgs(out, kSteps, 2, extra);
}

std::string UninterruptedHash(std::vector<std::string> extra) {
  return DoneHash(TrainTiny("sup-full", kSteps, 2, extra));
}

// A step in [1, kSteps], different from run to run; the trace names it so a failure reproduces.
int RandomStep() {
  std::random_device rd;
  return 1 + static_cast<int>(rd() % kSteps);
}

void ExpectRecovered(const std::string& dir, const CommandResult& r, const std::string& want_hash,
                     const std::string& cause) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("supervisor: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restart 1/"), std::string::npos) << r.err;
  auto restarts = Events(dir, "restart");
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_NE(restarts[0]["cause"].get<std::string>().find(cause), std::string::npos) << restarts[0].dump();
  EXPECT_EQ(DoneHash(dir), want_hash);
  ExpectEachStepOnce(dir, kSteps);
}

// Rank 0 writes the checkpoints, and its Save(4) waits for the step-2 checkpoint to commit.
// So a kill of rank 0 as step 5 begins, or of another rank as step 6 begins (it finished
// step 5's allreduce, which rank 0 joined only after Save(4)), comes after that commit: the
// restart must resume (not start over, which would also give the same hash).
// An earlier kill may come before any commit, and then the restart starts at step 0.
void ExpectResumedIfCommitted(const std::string& dir, const CommandResult& r, int kill_step, int killed_rank) {
  if (kill_step >= (killed_rank == 0 ? 5 : 6)) {
    EXPECT_NE(r.err.find("resumed from"), std::string::npos) << r.err;
    EXPECT_GE(ExpectResumedAt(dir, -1), 2) << r.err;  // step 2's checkpoint, or a later one
  }
}

TEST(Supervisor, KilledAtARandomStepRestartsAndMatchesTheUninterruptedRun) {
  const std::string want = UninterruptedHash({});
  const int step = RandomStep();
  SCOPED_TRACE("kill at step " + std::to_string(step));
  std::string dir = MakeTempDir("sup-kill");
  CommandResult r =
      RunLockstep(Flags(dir, {"--max-restarts", "3", "--inject-fault", "kill:rank=0:step=" + std::to_string(step)}));
  EXPECT_NE(r.err.find("injected fault: SIGKILL"), std::string::npos) << r.err;
  ExpectRecovered(dir, r, want, "SIGKILL");
  ExpectResumedIfCommitted(dir, r, step, 0);
}

// Two MPI processes, rank 1 killed at a random step, --max-restarts 3.
TEST(Supervisor, MpiRankKilledAtARandomStepRestartsAndMatches) {
  const std::vector<std::string> mpi = {"--backend", "mpi", "--nproc", "2"};
  const std::string want = UninterruptedHash(mpi);
  const int step = RandomStep();
  SCOPED_TRACE("kill rank 1 at step " + std::to_string(step));
  std::string dir = MakeTempDir("sup-mpi");
  std::vector<std::string> extra = mpi;
  for (auto& e : {"--max-restarts", "3", "--inject-fault"}) extra.push_back(e);
  extra.push_back("kill:rank=1:step=" + std::to_string(step));
  CommandResult r = RunLockstep(Flags(dir, extra));
  ExpectRecovered(dir, r, want, "worker");
  ExpectResumedIfCommitted(dir, r, step, 1);
}

// Two host processes of two worker threads (--backend hier); rank 2, the first worker of the
// second host, killed at a random step: the whole host process dies, mpirun ends the job and
// the supervisor restarts it from the newest checkpoint.
TEST(Supervisor, HierHostProcessKilledAtARandomStepRestartsAndMatches) {
  const std::vector<std::string> hier = {"--nproc", "4", "--workers-per-host", "2"};
  const std::string want = UninterruptedHash(hier);
  const int step = RandomStep();
  SCOPED_TRACE("kill rank 2 at step " + std::to_string(step));
  std::string dir = MakeTempDir("sup-hier");
  std::vector<std::string> extra = hier;
  for (auto& e : {"--max-restarts", "3", "--inject-fault"}) extra.push_back(e);
  extra.push_back("kill:rank=2:step=" + std::to_string(step));
  CommandResult r = RunLockstep(Flags(dir, extra));
  ExpectRecovered(dir, r, want, "worker");
  ExpectResumedIfCommitted(dir, r, step, 2);
  EXPECT_EQ(Events(dir, "start").back()["backend"], "hier");
}

// SIGKILL after the step-8 shard is on disk but before the commit: `latest` still names the
// complete step-6 checkpoint, which verifies, and resuming from it finishes the run exactly.
TEST(Supervisor, KillDuringACheckpointLeavesLatestValid) {
  const std::string want = UninterruptedHash({});
  std::string dir = MakeTempDir("sup-ckpt");
  CommandResult killed = RunLockstep(Flags(dir, {"--inject-fault", "kill:rank=0:during=checkpoint:step=8"}));
  EXPECT_EQ(killed.exit_code, 128 + 9) << killed.err;  // no supervisor: the SIGKILL is the exit
  EXPECT_EQ(DoneHash(dir), "");
  CommandResult inspect = RunLockstep({"inspect", dir + "/checkpoints"});
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("step 6"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("checksums: 51/51 shards ok"), std::string::npos) << inspect.out;
  CommandResult resumed = RunLockstep(Flags(dir, {"--resume", "auto"}));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  ExpectResumedAt(dir, 6);  // the torn step-8 save is skipped, not resumed from nor started over
  EXPECT_EQ(DoneHash(dir), want);
  ExpectEachStepOnce(dir, kSteps);

  // The same fault under the supervisor recovers by itself; in the first checkpoint (nothing
  // committed yet) it restarts from step 0.
  std::string sup = MakeTempDir("sup-ckpt2");
  CommandResult r = RunLockstep(Flags(sup, {"--max-restarts", "1", "--inject-fault", "kill:rank=0:during=checkpoint"}));
  EXPECT_NE(r.err.find("from step 0"), std::string::npos) << r.err;
  ExpectRecovered(sup, r, want, "SIGKILL");
}

// The timeout leaves room for an fsync on a loaded disk (a CI machine building in parallel).
TEST(Supervisor, HungWorkerIsDetectedByItsHeartbeat) {
  const std::string want = UninterruptedHash({});
  std::string dir = MakeTempDir("sup-hang");
  CommandResult r = RunLockstep(
      Flags(dir, {"--max-restarts", "2", "--heartbeat-timeout", "6", "--inject-fault", "hang:rank=0:step=5"}));
  EXPECT_NE(r.err.find("(hung)"), std::string::npos) << r.err;
  ExpectRecovered(dir, r, want, "no heartbeat from rank-0");
  ExpectResumedIfCommitted(dir, r, 5, 0);
}

// Bad input is not a failure to retry: one line, exit 2, no restart.
TEST(Supervisor, BadInputIsNotRetried) {
  std::string dir = MakeTempDir("sup-bad");
  CommandResult r = RunLockstep(Flags(dir, {"--max-restarts", "3", "--set", "optim.lr=-1"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.find("restart"), std::string::npos) << r.err;
  size_t lines = 0;
  for (char c : r.err) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << r.err;
}

// The same promise under a hybrid layout: a tensor- and pipeline-parallel job (sharded
// checkpoints written by all four ranks) loses a rank to SIGKILL mid-run, is restarted from
// `latest`, and ends with the weights of the uninterrupted run.
TEST(Supervisor, HybridLayoutRankKilledRestartsAndMatches) {
  const std::vector<std::string> layout = {"--nproc",         "4",     "--layout",      "tp=2,pp=2",
                                           "--deterministic", "--set", "model.layers=2"};
  const std::string full = UninterruptedHash(layout);
  // Every rank writes its shard and rank 0 commits; rank 0's Save(4) waits for the step-2
  // commit, and rank 3 starts step 6 only after a collective of step 5 with rank 0: a kill in
  // steps 6..8 therefore always finds a committed checkpoint to resume from.
  const int step = 6 + RandomStep() % 3;
  const std::string dir = MakeTempDir("sup-hybrid");
  std::vector<std::string> extra = layout;
  extra.insert(extra.end(), {"--max-restarts", "2", "--inject-fault", "kill:rank=3:step=" + std::to_string(step)});
  CommandResult r = RunLockstep(Flags(dir, extra));
  ASSERT_EQ(r.exit_code, 0) << "kill at step " << step << "\n" << r.err;
  EXPECT_EQ(Events(dir, "restart").size(), 1u) << r.err;
  EXPECT_EQ(DoneHash(dir), full) << "kill at step " << step;
  // The restart resumes from the newest committed checkpoint (not from step 0).
  EXPECT_LE(ExpectResumedAt(dir, -1), step - 1);
  EXPECT_NE(r.err.find("resumed from"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lockstep::testing
