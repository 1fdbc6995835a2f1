// A GPT stage composed from its measured pieces (embeddings, blocks, head): the tensors a
// pipeline stage holds per micro-batch, recompute's kept inputs and rerun forward, measured
// bf16 blocks, and input the model refuses.
#include <gtest/gtest.h>

#include "lockstep/planner/planner.h"
#include "lockstep/planner/profile.h"
#include "lockstep/planner/step_model.h"
#include "planner/planner_test_util.h"

namespace lockstep::planner {
namespace {

// Embeddings, three blocks and the head: fwd, bwd, saved and peak bytes of each.
StagePieces ThreeBlockStage() {
  StagePieces p;
  p.has_embedding = p.has_head = true;
  p.blocks = 3;
  p.embedding = {1, 1, 100, 150, 0};
  p.block = {10, 20, 1000, 1600, 0};
  p.head = {2, 3, 200, 500, 0};
  return p;
}

// A pipeline stage's micro-batch in flight holds its output to the backward (not the last stage)
// and its received input's gradient until sent (not the first); recompute one tensor more on the
// last stage, two (one block) or three (more) on the others. In [rows, T, C] tensors.
TEST(PlanStepModel, PipelineStagesHoldTheirStreamTensorsPerMicroBatch) {
  struct Case {
    bool first, last;
    int blocks;
    int none, recompute;
  };
  for (const Case& c : {Case{true, true, 3, 0, 1}, Case{true, false, 3, 1, 4}, Case{true, false, 1, 1, 3},
                        Case{false, false, 1, 2, 4}, Case{false, false, 2, 2, 5}, Case{false, true, 3, 1, 2}}) {
    StagePieces p = ThreeBlockStage();
    p.has_embedding = c.first;
    p.has_head = c.last;
    p.blocks = c.blocks;
    p.block_input_bytes = 64;
    SCOPED_TRACE(::testing::Message() << "first " << c.first << " last " << c.last << " blocks " << c.blocks);
    EXPECT_EQ(ComposeStage(p, {}).stream_bytes, 64 * c.none);
    EXPECT_EQ(ComposeStage(p, {false, true, 1.0}).stream_bytes, 64 * c.recompute);
    p.tensor_parallel = true;  // the last stage's recompute holds none more
    EXPECT_EQ(ComposeStage(p, {false, true, 1.0}).stream_bytes, 64 * (c.last ? c.recompute - 1 : c.recompute));
  }
  // Counted once per micro-batch in flight, beside the saved bytes and the workspace.
  LayoutInput in;
  in.pp = 2;
  in.micros = 4;
  in.stages = {Stage(1, 2), Stage(1, 2)};
  in.stages[0].stream_bytes = 64;
  Result<Prediction> p = PredictLayout(in, CommTable());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->memory[0].activation_bytes,
            2 * (in.stages[0].saved_bytes + in.stages[0].workspace_bytes + 64));  // 1F1B: 2 in flight
}

TEST(PlanStepModel, RecomputeKeepsBlockInputsAndRunsTheirForwardAgain) {
  StagePieces p = ThreeBlockStage();
  p.block_input_bytes = 64;
  StageCost plain = ComposeStage(p, {});
  EXPECT_DOUBLE_EQ(plain.fwd_ms, 33);
  EXPECT_DOUBLE_EQ(plain.bwd_ms, 64);
  EXPECT_EQ(plain.saved_bytes, 3300);
  EXPECT_EQ(plain.workspace_bytes, 600);
  StageCost rec = ComposeStage(p, {false, true, 1.0});
  EXPECT_DOUBLE_EQ(rec.fwd_ms, 33);
  EXPECT_DOUBLE_EQ(rec.bwd_ms, 94);
  EXPECT_EQ(rec.saved_bytes, 100 + 3 * 64 + 200);
  EXPECT_EQ(rec.workspace_bytes, 1600 - 64);
  StageCost half = ComposeStage(p, {true, false, 2.0});
  EXPECT_DOUBLE_EQ(half.fwd_ms, 16.5);
  EXPECT_EQ(half.saved_bytes, 1650);
}

// A profile that measured the block in bf16 gives bf16 stages its times and activation bytes
// (lockstep keeps activations in fp32: nothing is halved); the embedding and head keep fp32's.
TEST(PlanStepModel, MeasuredBf16BlockReplacesTheAssumption) {
  StagePieces p = ThreeBlockStage();
  p.send_bytes = 64;
  p.eval_bytes = 900;
  p.block.bf16_fwd_ms = 6;
  p.block.bf16_bwd_ms = 11;
  p.block.bf16_saved_bytes = 1100;
  p.block.bf16_peak_bytes = 1500;
  const StageCost s = ComposeStage(p, {true, false, 2.0});
  EXPECT_DOUBLE_EQ(s.fwd_ms, 1 + 3 * 6 + 2);
  EXPECT_DOUBLE_EQ(s.bwd_ms, 1 + 3 * 11 + 3);
  EXPECT_EQ(s.saved_bytes, 100 + 3 * 1100 + 200);
  EXPECT_EQ(s.workspace_bytes, 400);  // the block's 1500 - 1100, more than the head's 500 - 200
  EXPECT_EQ(s.send_bytes, 64);
  EXPECT_EQ(s.eval_bytes, 900);
  const StageCost fp32 = ComposeStage(p, {});
  EXPECT_DOUBLE_EQ(fp32.fwd_ms, 33);
  EXPECT_EQ(fp32.saved_bytes, 3300);
}

TEST(PlanStepModel, RejectsInconsistentInput) {
  LayoutInput in;
  in.pp = 2;
  in.stages = {Stage(1, 1)};
  EXPECT_EQ(PredictLayout(in, CommTable()).status().code(), StatusCode::kInvalidArgument);
  in.pp = 1;
  in.micros = 0;
  EXPECT_EQ(PredictLayout(in, CommTable()).status().code(), StatusCode::kInvalidArgument);
}

// Four workers on two cores (oversubscribed 2): 10 ms of CPU each is a 20 ms pass when shared
// fairly; the slowest worker's 22, 24 and 21 ms (median 22) are a 1.1 loss. Passes where the
// slowest is faster than fair (the scheduler ran it first) never make the loss below 1, and
// workers with their own cores have none.
}  // namespace
}  // namespace lockstep::planner
