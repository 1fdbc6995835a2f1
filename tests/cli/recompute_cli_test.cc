// train.recompute = "block" end to end, in every kind of layout (issue 14): a block recomputes
// exactly the arithmetic of its first forward, so deterministic runs end with the weights of
// the run without recompute — on one worker, under ZeRO-3 (the block's parameters gathered
// again for the recompute), tensor parallel (its forward allreduce redone) and pipeline stages
// (per micro-batch). The memory row shows recompute was on (an estimate for the one block
// alive again) and one worker's activation peak drops.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kSteps = 4;

std::vector<std::string> With(std::vector<std::string> extra) {
  std::vector<std::string> a = {"--deterministic", "--set", "model.layers=2"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(RecomputeCli, EveryLayoutEndsWithTheWeightsOfTheRunWithout) {
  const std::string none = TrainTiny("recompute-none", kSteps, 0, With({}));
  const std::vector<std::vector<std::string>> layouts = {
      {},
      {"--nproc", "2", "--zero", "3"},
      {"--nproc", "4", "--layout", "tp=2,pp=2"},
      {"--nproc", "2", "--layout", "pp=2", "--set", "train.pp_schedule=gpipe"},
  };
  for (const std::vector<std::string>& layout : layouts) {
    std::vector<std::string> extra = {"--set", "train.recompute=block"};
    extra.insert(extra.end(), layout.begin(), layout.end());
    const std::string dir = TrainTiny("recompute-block", kSteps, 0, With(extra));
    const std::string name = layout.empty() ? "one worker" : layout[1] + " " + layout.back();
    EXPECT_EQ(DoneHash(dir), DoneHash(none)) << name;
    const nlohmann::json mem = LastMemoryRow(dir);
    EXPECT_GT(mem["activations_estimate"]["recompute"].get<int64_t>(), 0) << name << ": " << mem.dump();
    if (layout.empty()) {
      EXPECT_LT(mem["peak_activation_bytes"].get<int64_t>(),
                LastMemoryRow(none)["peak_activation_bytes"].get<int64_t>());
    }
  }
  EXPECT_EQ(LastMemoryRow(none)["activations_estimate"]["recompute"].get<int64_t>(), 0);
}

}  // namespace
}  // namespace lockstep::testing
