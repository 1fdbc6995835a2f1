// The planner's measurement: sharing loss between workers, time scaling, how many passes a
// piece is timed over, the layout input built from a profile, and the probe line's caution.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "lockstep/planner/planner.h"
#include "lockstep/planner/profile.h"
#include "lockstep/planner/profile_cache.h"
#include "lockstep/planner/step_model.h"
#include "planner/planner_test_util.h"

namespace lockstep::planner {
namespace {

TEST(PlanProfile, SharingLossIsTheSlowestWorkersPassOverTheFairShare) {
  const std::vector<std::vector<double>> cpu = {{10, 10, 10}, {10, 10, 10}, {10, 10, 10}, {10, 10, 10}};
  const std::vector<std::vector<double>> wall = {{22, 12, 21}, {15, 24, 18}, {20, 20, 20}, {11, 11, 11}};
  EXPECT_DOUBLE_EQ(SharingLoss(wall, cpu, 2.0), 1.1);
  EXPECT_DOUBLE_EQ(SharingLoss({{15}, {18}}, {{10}, {10}}, 2.0), 1.0);
  EXPECT_DOUBLE_EQ(SharingLoss(wall, cpu, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(SharingLoss({{22}, {}}, {{10}, {10}}, 2.0), 1.0);  // a worker without passes
}

// The second look's correction: every time of every piece (fp32 and bf16) and the optimizer's
// scaled; bytes and the ZeRO figures (measured apart) left alone.
TEST(PlanProfile, ScaleTimesScalesEveryTimeAndNothingElse) {
  ComputeProfile p;
  PieceCost c;
  c.fwd_ms = 2;
  c.bwd_ms = 4;
  c.warm_fwd_ms = 1;
  c.recompute_fwd_ms = 3;
  c.bf16_fwd_ms = 1;
  c.bf16_bwd_ms = 2;
  c.bf16_recompute_fwd_ms = 5;
  c.saved_bytes = 100;
  c.peak_bytes = 200;
  c.zero_ns_per_element[1] = 7;
  p.gpt[{4, 1}] = {c, c, c};
  p.whole[8] = c;
  p.optimizer_ns_per_element = 10;
  p.ScaleTimes(0.5);
  for (const PieceCost* s : {&p.gpt[{4, 1}].embedding, &p.gpt[{4, 1}].block, &p.gpt[{4, 1}].head, &p.whole[8]}) {
    EXPECT_EQ(s->fwd_ms, 1);
    EXPECT_EQ(s->bwd_ms, 2);
    EXPECT_EQ(s->warm_fwd_ms, 0.5);
    EXPECT_EQ(s->recompute_fwd_ms, 1.5);
    EXPECT_EQ(s->bf16_fwd_ms, 0.5);
    EXPECT_EQ(s->bf16_bwd_ms, 1);
    EXPECT_EQ(s->bf16_recompute_fwd_ms, 2.5);
    EXPECT_EQ(s->saved_bytes, 100);
    EXPECT_EQ(s->peak_bytes, 200);
    EXPECT_EQ(s->zero_ns_per_element[1], 7);
  }
  EXPECT_EQ(p.optimizer_ns_per_element, 5);
  const ShapeKey gpt_key{4, 1}, whole_key{8, 1};
  EXPECT_EQ(&p.Main(gpt_key, true), &p.gpt[gpt_key].block);
  EXPECT_EQ(&p.Main(whole_key, false), &p.whole[8]);
}

// The profile's timed passes: as many as fit 1.5 s of the first one, between the request's
// count and 21 (a request above 21 is kept); nothing measured keeps the request's.
TEST(PlanProfile, TimedPassesFillTheBudgetBetweenTheRequestAndTwentyOne) {
  EXPECT_EQ(TimedPasses(27.0, 5), 21);   // cnn-fashion's line-up: capped
  EXPECT_EQ(TimedPasses(100.0, 5), 15);  // 1500 / 100
  EXPECT_EQ(TimedPasses(173.8, 5), 8);   // rounded down
  EXPECT_EQ(TimedPasses(288.7, 5), 5);   // a long pass: the request's
  EXPECT_EQ(TimedPasses(5000.0, 5), 5);
  EXPECT_EQ(TimedPasses(10.0, 30), 30);
  EXPECT_EQ(TimedPasses(0.0, 5), 5);
  EXPECT_EQ(TimedPasses(-1.0, 7), 7);
}

// A two-layer GPT of width 16 and context 8, batch 4, read as `lockstep plan` reads it for
// `world` workers. The file is this process's own: CTest runs each test case as its own process,
// two at once, and with one shared path one case removed the file while the other read it.
Result<PlanSetup> TinyPlanSetup(int world) {
  const std::string path = ::testing::TempDir() + "/plan_layout_input_" + std::to_string(getpid()) + ".toml";
  std::ofstream(path) << "[model]\nkind = \"gpt\"\nvocab = 16\ncontext = 8\nlayers = 2\nheads = 2\nwidth = 16\n"
                         "[data]\nkind = \"text\"\n[train]\nbatch_size = 4\nsteps = 1\n";
  Result<PlanSetup> setup = ReadPlanSetup(path, {}, world);
  std::remove(path.c_str());
  return setup;
}

// The profile cache's key names the whole model: a Llama shrunk by --set is another model, and
// its plan must measure it rather than read the full one's figures (it once did: the key of any
// model other than the GPT was its kind alone).
TEST(PlanProfile, CacheKeyNamesEveryModelKey) {
  const std::string path = ::testing::TempDir() + "/plan_key_" + std::to_string(getpid()) + ".toml";
  std::ofstream(path) << "[model]\nkind = \"llama\"\nvocab = 16\ncontext = 8\nlayers = 2\nheads = 2\n"
                         "kv_heads = 1\nwidth = 16\nffn_hidden = 32\n[data]\nkind = \"text\"\n[train]\nbatch_size = 4\n"
                         "steps = 1\n";
  Result<PlanSetup> full = ReadPlanSetup(path, {}, 1);
  Result<PlanSetup> narrow = ReadPlanSetup(path, {"model.width=8"}, 1);
  Result<PlanSetup> kv = ReadPlanSetup(path, {"model.kv_heads=2"}, 1);
  Result<PlanSetup> again = ReadPlanSetup(path, {}, 1);
  std::remove(path.c_str());
  ASSERT_TRUE(full.ok() && narrow.ok() && kv.ok() && again.ok()) << full.status().ToString();
  EXPECT_NE(ProfileKey(*full), ProfileKey(*narrow));
  EXPECT_NE(ProfileKey(*full), ProfileKey(*kv));
  EXPECT_EQ(ProfileKey(*full), ProfileKey(*again));
}

// The evaluation's activations: the largest piece's measured peak, except that with tp = 1 the
// head's logits (sized [rows, T, vocab], like no block buffer) come on top of the blocks' buffers,
// which the pool still holds when the head runs: the head's peak less its input copy and its
// LayerNorm output ([rows, T, C] each, which the blocks' buffers hold).
TEST(PlanLayoutInput, EvaluationAddsTheHeadsLogitsToTheBlocksWhenNoBufferFits) {
  for (int tp : {1, 2}) {
    Result<PlanSetup> setup = TinyPlanSetup(tp);
    ASSERT_TRUE(setup.ok()) << setup.status().ToString();
    Candidate c;
    c.dims.tp = tp;
    c.micro_rows = 2;
    c.stages = {StageLayout{true, true, 2, {100, 200, 200, 50}, {{0, 1}, {1, 2}, {2, 3}, {3, 4}}, {}},
                StageLayout{true, false, 2, {100, 200, 200}, {{0, 1}, {1, 2}, {2, 3}}, {}}};
    ComputeProfile profile;
    for (int64_t rows : {2, 4}) {  // the micro-batch, and the evaluation's whole batch
      GptPieceCosts& g = profile.gpt[{rows, tp}];
      g.embedding.eval_peak_bytes = 100;
      g.block.eval_peak_bytes = 9000;
      g.head.eval_peak_bytes = 5000;
    }
    Result<LayoutInput> in = BuildLayoutInput(c, *setup, profile, Table(tp));
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    const int64_t act = 4 * 4 * 8 * 16;  // [rows, T, C] in fp32: the whole batch of 4 rows evaluates
    EXPECT_EQ(in->stages.at(0).eval_bytes, tp == 1 ? 9000 + 5000 - 2 * act : 9000) << tp;
    EXPECT_EQ(in->stages.at(1).eval_bytes, 9000) << tp;  // no head on this stage
  }
}

// ZeRO is measured on the unsharded block; a tensor-parallel stage takes that figure per element
// of its own shards (not the curves, which hide ZeRO-3 behind backward), and keeps its own if
// the profile has one.
TEST(PlanLayoutInput, TensorParallelStagesTakeTheUnshardedZeroFigure) {
  Result<PlanSetup> setup = TinyPlanSetup(4);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  Candidate c;
  c.dims.dp = 2;
  c.dims.tp = 2;
  c.zero = 3;
  c.micro_rows = 2;
  c.stages = {StageLayout{true, true, 2, {100, 200, 200, 50}, {{0, 1}, {1, 2}, {2, 3}, {3, 4}}, {}}};
  ComputeProfile profile;
  profile.gpt[{2, 1}].block.zero_ns_per_element[0] = 3.0;
  profile.gpt[{2, 1}].block.zero_ns_per_element[1] = 30.0;
  profile.gpt[{2, 2}].block.zero_ns_per_element[0] = 5.0;  // a tensor-parallel shape with ZeRO-2 only: kept
  for (int64_t rows : {2, 4}) profile.gpt[{rows, 2}].block.eval_peak_bytes = 1;
  Result<LayoutInput> in = BuildLayoutInput(c, *setup, profile, Table(2));
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_DOUBLE_EQ(in->stages.at(0).zero_ns_per_element[0], 5.0);
  EXPECT_DOUBLE_EQ(in->stages.at(0).zero_ns_per_element[1], 30.0);
}

// The probe line: the pass over the workers against the profile's, and on the threads backend a
// caution once the workers ran 15% or more slower than in the profile (the step times' shortfall,
// 1 - 1/ratio); none on MPI, where the trained steps did not follow the probe.
TEST(PlanProbeLine, CautionsOnlyWhereThreadsRanSlowerThanTheProfile) {
  const std::string slow = ProbeLine(8, "threads", "the model", 2, 2.84, 2.15);
  EXPECT_NE(slow.find("the ZeRO probe's plain pass over the 8 worker threads, the model at 2 rows: 2.84 ms, 1.32x the "
                      "profile's 2.15; "),
            std::string::npos)
      << slow;
  EXPECT_NE(slow.find("may be up to 24% low"), std::string::npos) << slow;
  const std::string near = ProbeLine(4, "threads", "a block", 1, 4.0, 3.82);
  EXPECT_EQ(
      near,
      "the ZeRO probe's plain pass over the 4 worker threads, a block at 1 row: 4.00 ms, 1.05x the profile's 3.82");
  const std::string mpi = ProbeLine(4, "mpi", "the model", 4, 2.73, 1.94);
  EXPECT_EQ(mpi.find("low"), std::string::npos) << mpi;
  EXPECT_NE(mpi.find("over the 4 processes"), std::string::npos) << mpi;
}

}  // namespace
}  // namespace lockstep::planner
