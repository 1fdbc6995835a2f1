// A non-finite gradient never reaches an update or a checkpoint: with
// --inject-fault nan (an inf in one gradient element of one rank, or a NaN loss) the run stops
// with exit status 3 and `latest` still names the last good checkpoint, whose weights are
// finite and are those of the run without the fault at that step; with train.skip_nonfinite
// the step is skipped (a metrics row says so) and training goes on; too many skips in a row
// stop it; the supervisor does not retry exit 3.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kSteps = 8;

std::vector<std::string> Args(const std::string& out, std::vector<std::string> extra) {
  return TinyTrainArgs(out, kSteps, 2, extra);
}

std::string Latest(const std::string& dir) {
  std::ifstream in(dir + "/checkpoints/latest");
  std::string name;
  in >> name;
  return name;
}

std::vector<nlohmann::json> Rows(const std::string& dir) {
  std::vector<nlohmann::json> rows;
  for (const std::string& l : ReadLines(dir + "/metrics.jsonl")) rows.push_back(nlohmann::json::parse(l));
  return rows;
}

// `lockstep eval`'s val_loss of a checkpoint: finite weights give a finite loss.
double EvalLoss(const std::string& ckpt) {
  std::vector<std::string> args = TinyGptFlags();
  args.insert(args.begin(), "eval");
  args.insert(args.end(), {"--checkpoint", ckpt});
  CommandResult r = RunLockstep(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_discarded() ? NAN : j.value("val_loss", NAN);
}

// `where`: how the message names the first non-finite value (a parameter on a rank, or the loss).
void ExpectStoppedAtStep5(const std::vector<std::string>& extra, const std::string& where) {
  const std::string dir = MakeTempDir("nonfinite-stop");
  CommandResult r = RunLockstep(Args(dir, extra));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("step 5: non-finite"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(where), std::string::npos) << r.err;
  EXPECT_EQ(DoneHash(dir), "");
  // The fault struck in step 5, after the step-4 checkpoint: that one is `latest`, and no
  // training row of step 5 or later exists.
  EXPECT_EQ(Latest(dir), "step-00000004");
  for (const nlohmann::json& row : Rows(dir)) {
    if (row.contains("loss")) {
      EXPECT_LT(row["step"].get<int64_t>(), 5) << row.dump();
    }
  }
  EXPECT_TRUE(std::isfinite(EvalLoss(dir + "/checkpoints/latest")));
}

TEST(NonFinite, AnInfGradientStopsWithExit3AndKeepsTheLastGoodCheckpoint) {
  ExpectStoppedAtStep5({"--inject-fault", "nan:rank=0:step=5"}, "(first: wte.weight on rank 0)");
  // On 4 workers the inf sits on rank 2 only, in an element of its share of the norm: the
  // ranks gather who found it, and rank 0's message names rank 2.
  ExpectStoppedAtStep5({"--nproc", "4", "--inject-fault", "nan:rank=2:step=5"}, " on rank 2)");
}

TEST(NonFinite, ANanLossStopsTheSameWay) {
  ExpectStoppedAtStep5({"--inject-fault", "nan:rank=0:step=5:in=loss"}, "(first: the loss)");
  ExpectStoppedAtStep5({"--nproc", "4", "--zero", "3", "--inject-fault", "nan:rank=3:step=5:in=loss"},
                       "(first: the loss)");
}

// The training state in the checkpoint of `step` in run_dir, from its manifest: each tensor's
// name -> the xxh64 of each stored piece with its element range, and the optimizer's step
// count (AdamW's bias correction reads it).
std::map<std::string, std::vector<std::string>> TensorChecksums(const std::string& run_dir, int step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08d", step);
  std::ifstream in(run_dir + "/checkpoints/" + name + "/manifest.json");
  const nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
  std::map<std::string, std::vector<std::string>> out;
  EXPECT_FALSE(m.is_discarded()) << run_dir << ": no manifest for " << name;
  if (m.is_discarded()) return out;
  for (const nlohmann::json& t : m["tensors"])
    for (const nlohmann::json& p : t["shards"])
      out[t["name"].get<std::string>()].push_back(std::to_string(p["begin"].get<int64_t>()) + "-" +
                                                  std::to_string(p["end"].get<int64_t>()) + ":" +
                                                  p["xxh64"].get<std::string>());
  out["extra.optimizer_step"] = {m["extra"].value("optimizer_step", nlohmann::json()).dump()};
  return out;
}

// With skip_nonfinite, step 5's update is skipped: the run finishes, says so in a row of its
// own, and (deterministic mode) differs from the run without the fault only by that step.
TEST(NonFinite, SkipModeSkipsTheUpdateAndGoesOn) {
  for (const char* nproc : {"1", "4"}) {
    const std::string dir = MakeTempDir("nonfinite-skip");
    CommandResult r = RunLockstep(TinyTrainArgs(dir, kSteps, 1,
                                                {"--nproc", nproc, "--deterministic", "--inject-fault",
                                                 "nan:rank=0:step=5", "--set", "train.skip_nonfinite=true"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<int64_t> trained, skipped;
    std::string where;
    for (const nlohmann::json& row : Rows(dir)) {
      if (row.contains("loss")) trained.push_back(row["step"].get<int64_t>());
      if (row.value("skipped", "") == "nonfinite_grad") {
        skipped.push_back(row["step"].get<int64_t>());
        where = row.value("where", "");
      }
    }
    EXPECT_EQ(skipped, std::vector<int64_t>{5}) << "nproc " << nproc;
    // The row names the parameter and the rank the inf was injected on, whatever rank reports.
    EXPECT_TRUE(where.size() > 10 && where.substr(where.size() - 10) == " on rank 0") << where;
    EXPECT_EQ(trained, (std::vector<int64_t>{1, 2, 3, 4, 6, 7, 8})) << "nproc " << nproc;
    EXPECT_NE(r.err.find("update skipped"), std::string::npos) << r.err;
    EXPECT_EQ(DoneHash(dir).size(), 16u);
    EXPECT_NE(DoneHash(dir), DoneHash(TrainTiny("nonfinite-clean", kSteps, 2, {"--deterministic"})));
    // The skipped step changed nothing: weights and optimizer state (moments and step count)
    // after step 5 are those after step 4, piece by piece.
    const std::map<std::string, std::vector<std::string>> after4 = TensorChecksums(dir, 4),
                                                          after5 = TensorChecksums(dir, 5);
    EXPECT_GT(after4.size(), 10u) << "nproc " << nproc;
    EXPECT_EQ(after5, after4) << "nproc " << nproc;
  }
}

// A loss that stays non-finite: with max_skipped = 2, the third skip in a row stops the run.
// A huge learning rate drives the weights to inf within a few steps (no clipping) and they
// stay there.
TEST(NonFinite, TooManySkipsInARowStop) {
  const std::string dir = MakeTempDir("nonfinite-many");
  CommandResult r =
      RunLockstep(TinyTrainArgs(dir, 30, 2,
                                {"--set", "train.skip_nonfinite=true", "--set", "train.max_skipped=2", "--set",
                                 "optim.lr=1e30", "--set", "optim.grad_clip=0", "--set", "optim.warmup_steps=0"}));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("3 steps in a row were non-finite (train.max_skipped = 2)"), std::string::npos) << r.err;
  int skips = 0;
  for (const nlohmann::json& row : Rows(dir)) skips += row.value("skipped", "") == "nonfinite_grad";
  EXPECT_EQ(skips, 2);
}

TEST(NonFinite, TheSupervisorDoesNotRetryExit3) {
  const std::string dir = MakeTempDir("nonfinite-sup");
  CommandResult r = RunLockstep(Args(dir, {"--max-restarts", "3", "--inject-fault", "nan:rank=0:step=5"}));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.err.find("restart 1/"), std::string::npos) << r.err;
  EXPECT_EQ(Latest(dir), "step-00000004");
}

}  // namespace
}  // namespace lockstep::testing
