// Crash safety: a save of step 2 over a root holding step 1 is "killed" at every single
// file-system mutation (and separately has just that one mutation fail), then what was not
// made durable is dropped as a power loss would: bytes after a file's last fsync, and every
// name (file created, rename, exchange) whose directory was not fsynced since (fault_env.h). Afterwards `latest` must name a complete checkpoint that
// opens and verifies, every complete-named directory must be valid, and a later save works.
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/fault_env.h"
#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/resolve.h"
#include "lockstep/checkpoint/writer.h"
#include "lockstep/core/log.h"

namespace lockstep::checkpoint {
namespace {

using namespace testing;

constexpr int kWorld = 2;

// The collective save, ranks in a fixed order on one thread so mutation numbers are stable.
Status Save(const std::string& root, int64_t step, const std::vector<TestTensor>& model, Env* env, int keep) {
  WriterOptions opt{env, keep};
  std::vector<CheckpointWriter> writers;
  for (int r = kWorld - 1; r >= 0; --r) {
    LS_ASSIGN_OR_RETURN(CheckpointWriter w, CheckpointWriter::Begin(root, step, r, kWorld, opt));
    LS_RETURN_IF_ERROR(w.WriteShard(SplitPieces(model, r, kWorld)));
    writers.push_back(std::move(w));
  }
  return writers.back().Commit({{"config_hash", "cfg"}, {"step", step}});
}

// Checks the state after a crash; returns the step `latest` names.
int64_t CheckRecovered(const std::string& root, const std::vector<std::vector<TestTensor>>& models,
                       const std::string& context) {
  Result<std::string> latest = ResolveLatest(root);
  EXPECT_TRUE(latest.ok()) << context << ": " << latest.status().ToString();
  if (!latest.ok()) return -1;
  Result<Checkpoint> c = Checkpoint::Open(*latest);
  EXPECT_TRUE(c.ok()) << context << ": " << c.status().ToString();
  if (!c.ok()) return -1;
  EXPECT_TRUE(c->Verify().ok()) << context;
  const int64_t step = c->step();
  EXPECT_TRUE(step >= 1 && step < static_cast<int64_t>(models.size())) << context;
  if (step >= 1 && step < static_cast<int64_t>(models.size())) {
    Status s = ExpectModel(*latest, models[step]);
    EXPECT_TRUE(s.ok()) << context << ": " << s.ToString();
  }
  // No complete-looking directory is half-written or half-deleted.
  Result<std::vector<std::pair<int64_t, std::string>>> all = ListCheckpoints(root);
  EXPECT_TRUE(all.ok()) << context;
  for (const auto& [st, dir] : all.ok() ? *all : std::vector<std::pair<int64_t, std::string>>{}) {
    Result<Checkpoint> d = Checkpoint::Open(dir);
    EXPECT_TRUE(d.ok() && d->Verify().ok()) << context << ": " << dir << " looks complete but is not";
  }
  Result<std::string> newest = FindNewestValid(root, nullptr);
  EXPECT_TRUE(newest.ok()) << context;
  return step;
}

void RunFaultSweep(bool crash, int keep) {
  log::SetLevel(log::Level::ERROR);  // injected pruning failures are logged as warnings
  std::vector<std::vector<TestTensor>> models = {{}, MakeModel(1), MakeModel(2), MakeModel(3)};
  TempDir tmp;
  const std::string base = tmp.Sub("base");
  ASSERT_TRUE(Save(base, 1, models[1], Env::Default(), keep).ok());
  // A stale .tmp of an older crashed save, which a successful commit prunes.
  std::filesystem::create_directories(base + "/step-00000000.tmp");
  // Count the mutations of a clean save.
  int64_t total = 0;
  {
    const std::string dry = tmp.Sub("dry");
    CopyTree(base, dry);
    FaultInjectionEnv env(Env::Default());
    ASSERT_TRUE(Save(dry, 2, models[2], &env, keep).ok());
    total = env.mutations();
    ASSERT_GT(total, 15);
  }
  int landed_on_new = 0;
  for (int64_t n = 1; n <= total + 1; ++n) {
    const std::string root = tmp.Sub("run-" + std::to_string(n));
    CopyTree(base, root);
    FaultInjectionEnv env(Env::Default());
    env.FailAt(n, crash);
    Status saved = Save(root, 2, models[2], &env, keep);
    std::string context = std::string(crash ? "crash" : "fail") + " at mutation " + std::to_string(n) + " (" +
                          (n <= total ? env.log()[n - 1] : "none") + "), save: " + saved.ToString();
    ASSERT_EQ(env.fault_hit(), n <= total) << context;
    ASSERT_TRUE(env.DropUnsyncedData().ok());
    int64_t step = CheckRecovered(root, models, context);
    if (saved.ok()) {
      EXPECT_EQ(step, 2) << context;  // ok means durable
    }
    landed_on_new += step == 2;
    // The next save, on a healthy disk, succeeds and cleans up.
    ASSERT_TRUE(Save(root, 3, models[3], Env::Default(), keep).ok()) << context;
    EXPECT_EQ(CheckRecovered(root, models, context + ", then step 3"), 3);
    for (const auto& e : std::filesystem::directory_iterator(root)) {
      const std::string name = e.path().filename().string();
      EXPECT_TRUE(name.find(".trash") == std::string::npos && name != "step-00000002.tmp" && name != "latest.tmp" &&
                  name != "step-00000000.tmp")
          << context << ": leftover " << name;
    }
    std::filesystem::remove_all(root);
  }
  // Faults before the latest rename keep step 1; the ones after it (pruning) keep step 2.
  EXPECT_GT(landed_on_new, 0);
  EXPECT_LT(landed_on_new, total);
}

TEST(CommitFault, CrashAtEveryMutation) { RunFaultSweep(/*crash=*/true, /*keep=*/1); }
TEST(CommitFault, SingleFailureAtEveryMutation) { RunFaultSweep(/*crash=*/false, /*keep=*/1); }
TEST(CommitFault, CrashAtEveryMutationKeepAll) { RunFaultSweep(/*crash=*/true, /*keep=*/0); }

// Data written but never fsynced is exactly what a power loss drops: without WriteShard's
// fsync the shard would come back empty, which the reader must reject rather than misread.
TEST(CommitFault, UnsyncedShardIsRejected) {
  TempDir tmp;
  FaultInjectionEnv env(Env::Default());
  Result<CheckpointWriter> w = CheckpointWriter::Begin(tmp.path(), 1, 0, 1, {&env, 0});
  ASSERT_TRUE(w.ok());
  std::vector<TestTensor> model = MakeModel(4);
  ASSERT_TRUE(w->WriteShard(SplitPieces(model, 0, 1)).ok());
  ASSERT_TRUE(w->Commit(nullptr).ok());
  // Simulate a later torn overwrite of the committed shard that never reached the disk.
  const std::string shard = tmp.path() + "/step-00000001/rank-00000.safetensors";
  Result<std::unique_ptr<WritableFile>> f = env.NewWritableFile(shard);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("garbage", 7).ok());
  ASSERT_TRUE((*f)->Close().ok());
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  EXPECT_EQ(FileSize(shard), 0u);
  Result<Checkpoint> c = Checkpoint::Open(tmp.path() + "/step-00000001");
  EXPECT_EQ(c.status().code(), StatusCode::kCorruption);
  EXPECT_NE(c.status().message().find(shard + ": truncated: 0 bytes"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace lockstep::checkpoint
