// GPT-2-style tied embeddings with a padded vocabulary (model.tie_embeddings,
// model.vocab_pad) under every kind of parallelism: in deterministic mode each layout ends with
// one worker's weights bit for bit (the pipeline sums the first stage's and the last stage's
// gradients of the tied table), a checkpoint written by a pipeline resumes in one worker, and
// `lockstep eval` of it gives the run's own validation loss.
#include <gtest/gtest.h>

#include <ostream>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

// 256 bytes padded to 320 rows: with 8 canonical vocabulary slices of 40 rows, slice 6 is
// partly padding and slice 7 entirely.
std::vector<std::string> Tied(const std::string& out, int steps, std::vector<std::string> extra) {
  std::vector<std::string> a = TinyGptFlags();
  a.insert(a.begin(), "train");
  for (const char* s : {"--set", "model.layers=2", "--set", "model.heads=4", "--set", "model.tie_embeddings=true",
                        "--set", "model.vocab_pad=160", "--set", "eval.every=3", "--set", "checkpoint.every=2", "--set",
                        "checkpoint.keep=5", "--deterministic"})
    a.push_back(s);
  for (const std::string& s : {std::string("--steps"), std::to_string(steps), std::string("--out"), out})
    a.push_back(s);
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

struct TiedCase {
  const char* name;
  std::vector<std::string> flags;
  const char* ran;  // WhatRan
};

void PrintTo(const TiedCase& c, std::ostream* os) { *os << c.name; }

class TiedLayout : public ::testing::TestWithParam<TiedCase> {};

TEST_P(TiedLayout, MatchesOneWorkerBitForBit) {
  const std::string one = CachedDoneHash(Tied("{out}", 4, {}));
  ASSERT_EQ(one.size(), 16u);
  const std::string dir = MakeTempDir("tied");
  CommandResult r = RunLockstep(Tied(dir, 4, GetParam().flags));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(DoneHash(dir), one);
  EXPECT_EQ(WhatRan(dir), GetParam().ran);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TiedLayout,
    ::testing::Values(
        TiedCase{"tp2", {"--nproc", "2", "--layout", "tp=2"}, "dp=1,tp=2,pp=1 zero=0 world=2 threads"},
        TiedCase{"pp2", {"--nproc", "2", "--layout", "pp=2"}, "dp=1,tp=1,pp=2 zero=0 world=2 threads 1f1b"},
        TiedCase{"zero3", {"--nproc", "2", "--zero", "3"}, "dp=2,tp=1,pp=1 zero=3 world=2 threads"},
        TiedCase{"tp2pp2", {"--nproc", "4", "--layout", "tp=2,pp=2"}, "dp=1,tp=2,pp=2 zero=0 world=4 threads 1f1b"},
        TiedCase{"dp2pp2zero2",
                 {"--nproc", "4", "--layout", "dp=2,pp=2", "--zero", "2"},
                 "dp=2,tp=1,pp=2 zero=2 world=4 threads 1f1b"},
        TiedCase{"dp2pp2zero3",
                 {"--nproc", "4", "--layout", "dp=2,pp=2", "--zero", "3"},
                 "dp=2,tp=1,pp=2 zero=3 world=4 threads 1f1b"}),
    [](const ::testing::TestParamInfo<TiedCase>& i) { return std::string(i.param.name); });

TEST(Tied, PipelineCheckpointResumesInOneWorkerAndEvaluates) {
  const std::string one = CachedDoneHash(Tied("{out}", 4, {}));
  const std::string writer = MakeTempDir("tied-writer");
  ASSERT_EQ(RunLockstep(Tied(writer, 4, {"--nproc", "4", "--layout", "tp=2,pp=2"})).exit_code, 0);
  const std::string ckpt = writer + "/checkpoints/step-00000002";
  // The checkpoint holds wte once (the last stage's copy is not written) and no head.
  CommandResult inspect = RunLockstep({"inspect", ckpt});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("model.wte.weight"), std::string::npos) << inspect.out;
  EXPECT_EQ(inspect.out.find("model.head.weight"), std::string::npos) << inspect.out;
  const std::string resumed = MakeTempDir("tied-resumed");
  CommandResult r = RunLockstep(Tied(resumed, 4, {"--resume", ckpt}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectResumedAt(resumed, 2);
  EXPECT_EQ(DoneHash(resumed), one);

  // nn::Gpt (eval) reads the final checkpoint to the loss the sharded run validated with.
  double last_val = -1;
  for (const std::string& l : ReadLines(writer + "/metrics.jsonl"))
    if (auto j = nlohmann::json::parse(l); j.contains("val_loss")) last_val = j["val_loss"].get<double>();
  std::vector<std::string> ev = {"eval", "--checkpoint", writer};
  std::vector<std::string> flags = Tied("", 4, {});
  for (size_t i = 1; i < flags.size(); ++i) {
    if (flags[i] == "--steps" || flags[i] == "--out") break;
    if (flags[i] == "--deterministic") continue;
    ev.push_back(flags[i]);
  }
  CommandResult e = RunLockstep(ev);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NEAR(nlohmann::json::parse(e.out)["val_loss"].get<double>(), last_val, 1e-6);
}

}  // namespace
}  // namespace lockstep::testing
