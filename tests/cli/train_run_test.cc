// End-to-end runs of `lockstep train` on a shrunken gpt-tiny: outputs, reproducibility,
// data-parallel equivalence. Each run takes a second or two.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

std::vector<std::string> With(std::vector<std::string> base, std::vector<std::string> more) {
  base.insert(base.begin(), "train");
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

TEST(TrainRun, WritesMetricsAndCheckpointAndIsReproducible) {
  std::string a = MakeTempDir("run-a"), b = MakeTempDir("run-b");
  CommandResult ra = RunLockstep(With(TinyGptFlags(), {"--steps", "6", "--set", "eval.every=3", "--out", a}));
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  auto lines = ReadLines(a + "/metrics.jsonl");
  ASSERT_GE(lines.size(), 8u);
  nlohmann::json first;  // the first training row (a start row comes before it)
  for (const std::string& l : lines)
    if (auto j = nlohmann::json::parse(l); first.is_null() && j.contains("loss")) first = j;
  for (const char* k : {"step", "loss", "lr", "grad_norm", "tokens_per_s", "step_ms"})
    EXPECT_TRUE(first.contains(k)) << k;
  // One worker communicates nothing (its bucket "allreduces" are no-ops, once reported as the
  // backward's span).
  EXPECT_EQ(first.value("comm_ms", -1.0), 0.0);
  EXPECT_EQ(first.value("exposed_comm_ms", -1.0), 0.0);
  int val_lines = 0;
  for (auto& l : lines) val_lines += nlohmann::json::parse(l).contains("val_loss");
  EXPECT_EQ(val_lines, 2);
  std::string hash = DoneHash(a);
  ASSERT_EQ(hash.size(), 16u);

  CommandResult rb = RunLockstep(With(TinyGptFlags(), {"--steps", "6", "--set", "eval.every=3", "--out", b}));
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(DoneHash(b), hash) << "same seed must give the same weights";

  CommandResult rc = RunLockstep(With(TinyGptFlags(), {"--steps", "6", "--set", "train.seed=99", "--out", b}));
  ASSERT_EQ(rc.exit_code, 0) << rc.err;
  EXPECT_NE(DoneHash(b), hash) << "another seed must give other weights";

  // The final checkpoint evaluates to the run's last validation loss.
  CommandResult ev =
      RunLockstep({"eval", "--config", "configs/gpt-tiny.toml", "--set", "model.layers=1", "--set", "model.width=32",
                   "--set", "model.heads=2", "--set", "model.context=32", "--set", "train.batch_size=8", "--set",
                   "eval.batches=2", "--checkpoint", a + "/checkpoints/step-00000006"});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  auto evj = nlohmann::json::parse(ev.out);
  nlohmann::json last_val;
  for (const std::string& l : lines)
    if (auto j = nlohmann::json::parse(l); j.contains("val_loss")) last_val = j;
  ASSERT_TRUE(last_val.contains("val_loss"));
  EXPECT_NEAR(evj["val_loss"].get<double>(), last_val["val_loss"].get<double>(), 1e-9);
}

}  // namespace
}  // namespace lockstep::testing

namespace lockstep::testing {
namespace {

// --trace writes Chrome trace JSON with one track per rank holding forward, backward, each
// bucket's allreduce, the optimizer and data loading; metrics carry the step breakdown.
TEST(TrainRun, TraceHasOneTrackPerRankWithStepPhases) {
  std::string dir = MakeTempDir("trace");
  std::vector<std::string> args = TinyGptFlags();
  args.insert(args.begin(), "train");
  for (const char* a : {"--steps", "3", "--nproc", "2", "--set", "train.bucket_bytes=4K"}) args.push_back(a);
  args.push_back("--out");
  args.push_back(dir);
  args.push_back("--trace");
  args.push_back(dir + "/trace.json");
  CommandResult r = RunLockstep(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir + "/trace.json");
  auto trace = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(trace.is_discarded());
  std::map<int, std::set<std::string>> names;
  std::map<int, int> allreduces;
  for (auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    names[e["tid"].get<int>()].insert(e["name"].get<std::string>());
    if (e["name"] == "allreduce") allreduces[e["tid"].get<int>()]++;
    EXPECT_GE(e["dur"].get<double>(), 0.0);
  }
  ASSERT_EQ(names.size(), 2u);
  for (auto& [rank, set] : names)
    for (const char* n : {"data", "forward", "backward", "allreduce", "optimizer", "wait for gradients"})
      EXPECT_TRUE(set.count(n)) << "rank " << rank << " lacks " << n;
  // 4 KiB buckets split the tiny model's gradients into several allreduces per step.
  EXPECT_GT(allreduces[0], 3 * 2);
  nlohmann::json first;
  for (const std::string& l : ReadLines(dir + "/metrics.jsonl"))
    if (auto j = nlohmann::json::parse(l); first.is_null() && j.contains("loss")) first = j;
  for (const char* k : {"compute_ms", "comm_ms", "exposed_comm_ms", "wait_ms"}) EXPECT_TRUE(first.contains(k)) << k;
}

}  // namespace
}  // namespace lockstep::testing
