// train.recompute = "block" end to end, in every kind of layout: a block recomputes
// exactly the arithmetic of its first forward, so deterministic runs end with the weights of
// the run without recompute — on one worker, under ZeRO-3 (the block's parameters gathered
// again for the recompute), tensor parallel (its forward allreduce redone) and pipeline stages
// (per micro-batch). In every layout the memory row shows recompute was on (an estimate for the
// one block alive again) and rank 0's measured activation peak drops against the same layout
// without it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kSteps = 4;

// Four layers: two blocks a pipeline stage at pp=2. With one block a stage there is nothing to
// drop (the stage holds its input for the recompute beside the one block it recomputes), and
// the measured peak rises instead: 264576 -> 280960 bytes at tp=2,pp=2 with two layers.
std::vector<std::string> With(std::vector<std::string> extra) {
  std::vector<std::string> a = {"--deterministic", "--set", "model.layers=4"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Rank 0's first memory row: written after its first step, while the step's activations are
// what the peak measured (the last row can be overwritten by validation's, which recompute
// does not change).
nlohmann::json FirstMemoryRow(const std::string& dir) {
  for (const nlohmann::json& j : Events(dir, "memory"))
    if (j.value("rank", -1) == 0) return j;
  ADD_FAILURE() << dir << ": no memory row of rank 0";
  return nlohmann::json::object();
}

TEST(RecomputeCli, EveryLayoutEndsWithTheWeightsOfTheRunWithoutAndHoldsFewerActivations) {
  const std::string none = TrainTiny("recompute-none", kSteps, 0, With({}));
  EXPECT_EQ(LastMemoryRow(none)["activations_estimate"]["recompute"].get<int64_t>(), 0);
  const std::vector<std::vector<std::string>> layouts = {
      {},
      {"--nproc", "2", "--zero", "3"},
      {"--nproc", "4", "--layout", "tp=2,pp=2"},
      {"--nproc", "2", "--layout", "pp=2", "--set", "train.pp_schedule=gpipe"},
  };
  for (const std::vector<std::string>& layout : layouts) {
    std::string name = layout.empty() ? "one worker" : "";
    for (const std::string& word : layout) name += (name.empty() ? "" : " ") + word;
    std::vector<std::string> extra = {"--set", "train.recompute=block"};
    extra.insert(extra.end(), layout.begin(), layout.end());
    const std::string dir = TrainTiny("recompute-block", kSteps, 0, With(extra));
    EXPECT_EQ(DoneHash(dir), DoneHash(none)) << name;
    const nlohmann::json mem = FirstMemoryRow(dir);
    EXPECT_GT(mem["activations_estimate"]["recompute"].get<int64_t>(), 0) << name << ": " << mem.dump();
    // The same layout without recompute holds more activations at its peak: the blocks'
    // insides were really dropped, not only the key parsed.
    const std::string without = layout.empty() ? none : TrainTiny("recompute-without", kSteps, 0, With(layout));
    const nlohmann::json base = FirstMemoryRow(without);
    EXPECT_LT(mem["peak_activation_bytes"].get<int64_t>(), base["peak_activation_bytes"].get<int64_t>())
        << name << ": " << mem.dump() << " against " << base.dump();
  }
}

}  // namespace
}  // namespace lockstep::testing
