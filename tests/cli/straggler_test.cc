// Stragglers end to end: `--inject-fault slow:rank=2:factor=3` on a 4-worker run makes rank 2
// the one named (a warning line with its host, a {"event":"straggler"} row), a run without it
// names nobody, and every training row carries each rank's compute and wait time — with the
// threads backend and under MPI. Pipeline runs report the stages' measured balance.
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"

namespace lockstep::testing {
namespace {

// A model big enough that a step's compute (tens of milliseconds) stands above the scheduling
// noise of four ranks sharing two cores; 30 steps leave a full window of 20 after the first.
// The detector's threshold is 1.5x, not the default 1.2x: with another process busy on the
// machine, a rank sharing its core stays 1.14-1.41x slower than the others for the whole run
// (a true straggler then, but not what these tests are about); the injected 3x rank measures
// ~2.5x.
std::vector<std::string> Args(const std::string& out, const std::vector<std::string>& extra) {
  std::vector<std::string> a = TinyTrainArgs(out, 30, 0, extra);
  for (const char* kv : {"model.layers=2", "model.width=128", "model.context=64", "train.batch_size=16",
                         "eval.batches=1", "train.log_every=10", "train.straggler_ratio=1.5"}) {
    a.push_back("--set");
    a.push_back(kv);
  }
  return a;
}

struct Rows {
  std::vector<nlohmann::json> training, stragglers, pipeline;
};

Rows Read(const std::string& dir) {
  Rows r;
  for (const std::string& line : ReadLines(dir + "/metrics.jsonl")) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("loss")) r.training.push_back(j);
    if (j.value("event", "") == "straggler") r.stragglers.push_back(j);
    if (j.value("event", "") == "pipeline") r.pipeline.push_back(j);
  }
  return r;
}

std::string Host() {
  char h[256] = {};
  gethostname(h, sizeof(h) - 1);
  return h;
}

void ExpectPerRankTimes(const Rows& rows, size_t world) {
  ASSERT_EQ(rows.training.size(), 30u);
  for (const nlohmann::json& row : rows.training) {
    ASSERT_EQ(row["rank_compute_ms"].size(), world) << row.dump();
    ASSERT_EQ(row["rank_wait_ms"].size(), world) << row.dump();
    for (size_t r = 0; r < world; ++r) {
      EXPECT_GT(row["rank_compute_ms"][r].get<double>(), 0.0) << row.dump();
      EXPECT_GE(row["rank_wait_ms"][r].get<double>(), 0.0) << row.dump();
    }
  }
}

void ExpectRank2Named(const std::vector<std::string>& backend) {
  const std::string dir = MakeTempDir("straggler");
  std::vector<std::string> extra = {"--nproc", "4", "--inject-fault", "slow:rank=2:factor=3"};
  extra.insert(extra.end(), backend.begin(), backend.end());
  CommandResult r = RunLockstep(Args(dir, extra));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Rows rows = Read(dir);
  ExpectPerRankTimes(rows, 4);
  ASSERT_EQ(rows.stragglers.size(), 1u) << r.err;
  const nlohmann::json& s = rows.stragglers[0];
  EXPECT_EQ(s["rank"], 2) << s.dump();
  EXPECT_EQ(s["host"], Host()) << s.dump();
  EXPECT_EQ(s["step"], 21) << s.dump();  // step 1 is warm-up, then a window of 20
  EXPECT_GT(s["ratio"].get<double>(), 1.5) << s.dump();
  EXPECT_NE(r.err.find("warning: straggler: rank 2 on host " + Host()), std::string::npos) << r.err;
  // The others waited for it: rank 2 waited least in most steps (a majority, not all: four
  // ranks share two cores, and under MPI the waiting ranks spin on the same cores).
  int least = 0;
  for (const nlohmann::json& row : rows.training) {
    const auto& wait = row["rank_wait_ms"];
    least += wait[2] <= wait[0] && wait[2] <= wait[1] && wait[2] <= wait[3];
  }
  EXPECT_GT(least, 15) << r.err;
}

TEST(Straggler, SlowRankOfFourIsNamed) { ExpectRank2Named({}); }

TEST(Straggler, SlowRankOfFourIsNamedUnderMpi) { ExpectRank2Named({"--backend", "mpi"}); }

TEST(Straggler, NoSlowRankNamesNobody) {
  const std::string dir = MakeTempDir("straggler-none");
  CommandResult r = RunLockstep(Args(dir, {"--nproc", "4"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Rows rows = Read(dir);
  ExpectPerRankTimes(rows, 4);
  EXPECT_TRUE(rows.stragglers.empty()) << rows.stragglers[0].dump();
  EXPECT_EQ(r.err.find("warning: straggler"), std::string::npos) << r.err;
}

TEST(Straggler, PipelineReportsMeasuredStageBalanceBesideTheEstimate) {
  const std::string dir = MakeTempDir("straggler-pp");
  CommandResult r =
      RunLockstep(TinyTrainArgs(dir, 6, 0, {"--nproc", "2", "--layout", "pp=2", "--set", "model.layers=2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Rows rows = Read(dir);
  ASSERT_EQ(rows.pipeline.size(), 2u) << r.err;  // the partition at the start, the measurement
  const nlohmann::json& m = rows.pipeline[1];
  EXPECT_EQ(m["step"], 6) << m.dump();            // a run shorter than the window: at its end
  EXPECT_EQ(m["steps_measured"], 5) << m.dump();  // step 1 left out
  ASSERT_EQ(m["measured_share"].size(), 2u);
  ASSERT_EQ(m["estimated_share"].size(), 2u);
  EXPECT_NEAR(m["measured_share"][0].get<double>() + m["measured_share"][1].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(m["estimated_share"][0].get<double>() + m["estimated_share"][1].get<double>(), 1.0, 1e-9);
  // The measured shares are the stages' busy time of steps 2..6 (one rank a stage here), as the
  // training rows report it: the work, not the time a stage waited.
  double busy[2] = {0, 0};
  for (const nlohmann::json& t : rows.training)
    if (t["step"].get<int64_t>() >= 2)
      for (int s = 0; s < 2; ++s) busy[s] += t["pp_busy_ms"][s].get<double>();
  ASSERT_GT(busy[0] + busy[1], 0.0);
  EXPECT_NEAR(m["measured_share"][0].get<double>(), busy[0] / (busy[0] + busy[1]), 1e-9) << m.dump();
  EXPECT_EQ(m["warning"].get<bool>(), m["worst_error"].get<double>() > 0.2) << m.dump();
  EXPECT_NE(r.err.find("pipeline: measured stage imbalance"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("more than 20% off") != std::string::npos, m["warning"].get<bool>()) << r.err;
}

}  // namespace
}  // namespace lockstep::testing
