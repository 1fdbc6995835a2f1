// The prediction model of `lockstep plan` on synthetic profiles: the collective curves, the
// ZeRO accounting of model states (ceil(numel/dp) shards, as the memory row counts them),
// activations in flight under 1F1B and GPipe, DDP bucket overlap, ZeRO-3's gathers, the
// pipeline makespan and bubble, accumulation, the optimizer term, recompute and bf16.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "lockstep/planner/planner.h"
#include "lockstep/planner/profile.h"
#include "lockstep/planner/step_model.h"
#include "planner/planner_test_util.h"

namespace lockstep::planner {
namespace {

TEST(PlanCommCurve, InterpolatesBetweenPointsFloorsBelowAndExtrapolatesAtTheLastBandwidth) {
  CommCurve c;
  c.Add(1000, 1.0);
  c.Add(3000, 2.0);
  EXPECT_DOUBLE_EQ(c.Ms(0), 0.0);
  EXPECT_DOUBLE_EQ(c.Ms(10), 1.0);
  EXPECT_DOUBLE_EQ(c.Ms(2000), 1.5);
  EXPECT_DOUBLE_EQ(c.Ms(6000), 4.0);
  CommTable t;
  t.Set(CommOp::kAllreduce, 4, c);
  EXPECT_DOUBLE_EQ(t.Ms(CommOp::kAllreduce, 1, 1 << 20), 0.0);  // a group of one
  EXPECT_DOUBLE_EQ(t.Ms(CommOp::kAllreduce, 4, 2000), 1.5);
  EXPECT_FALSE(t.Has(CommOp::kAllreduce, 2));
  Result<CommTable> back = CommTable::FromJson(t.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back->Ms(CommOp::kAllreduce, 4, 2000), 1.5);
}

TEST(PlanStepModel, ModelStatesFollowTheZeroAccountingWithCeilShards) {
  const int64_t numel = 2002;  // 3 replicas: shards of ceil(2002/3) = 668
  for (int zero = 0; zero <= 3; ++zero) {
    LayoutInput in;
    in.dp = 3;
    in.zero = zero;
    in.stages = {Stage(1, 2, {1000, 700, 302})};
    Result<Prediction> p = PredictLayout(in, Table(3));
    ASSERT_TRUE(p.ok());
    const StageMemory& m = p->memory[0];
    EXPECT_EQ(m.params_bytes, 4 * (zero == 3 ? 668 : numel)) << zero;
    EXPECT_EQ(m.grads_bytes, 4 * (zero >= 2 ? 668 : numel)) << zero;
    EXPECT_EQ(m.optimizer_bytes, 8 * (zero >= 1 ? 668 : numel)) << zero;
    // gradients (ZeRO-2/3): buffers of the two largest units (1000 + 700) and the parts rank 0
    // receives: its shard [0, 668) lies in the first unit; parameters: the two largest units
    // gathered (ZeRO-3)
    const int64_t grads = 4 * (1000 + 700 + 668);
    const int64_t in_flight = zero == 2 ? grads : zero == 3 ? grads + 4 * (1000 + 700) : 0;
    EXPECT_EQ(m.in_flight_bytes, in_flight) << zero;
    EXPECT_EQ(m.activation_bytes, 1100) << zero;
    EXPECT_EQ(p->peak_bytes, m.params_bytes + m.grads_bytes + m.optimizer_bytes + in_flight + 1100) << zero;
    // bf16: a 2-byte copy of every local weight, except under ZeRO-3 (no flat store to copy).
    in.states.copy_bytes = 2;
    Result<Prediction> bf16 = PredictLayout(in, Table(3));
    ASSERT_TRUE(bf16.ok());
    const int64_t copy = zero == 3 ? 0 : 2 * numel;
    EXPECT_EQ(bf16->memory[0].in_flight_bytes, in_flight + copy) << zero;
    EXPECT_EQ(bf16->peak_bytes, p->peak_bytes + copy) << zero;
  }
}

// Rank 0 receives the parts of the units its shard (the stage's first ceil(numel / dp)
// elements) covers, at most the four largest of them (reductions in flight and their spares).
TEST(PlanStepModel, ReceivedGradientPartsAreRankZerosCutOfTheUnits) {
  LayoutInput in;
  in.dp = 2;
  in.zero = 2;
  // Ten units of 10: rank 0 owns [0, 50), five whole units, of which four are held.
  in.stages = {Stage(1, 2, std::vector<int64_t>(10, 10))};
  EXPECT_EQ(PredictLayout(in, Table(2))->memory[0].in_flight_bytes, 4 * (10 + 10 + 4 * 10));
  // Units of 30, 50, 20: rank 0 owns [0, 50): all of the first unit and 20 of the second.
  in.stages = {Stage(1, 2, {30, 50, 20})};
  EXPECT_EQ(PredictLayout(in, Table(2))->memory[0].in_flight_bytes, 4 * (50 + 30 + 30 + 20));
}

// The evaluation computes no gradients: when its activations are the larger, ZeRO-2's gradient
// units are not beside them and ZeRO-3 holds only its two gathered parameter units.
TEST(PlanStepModel, EvaluationPeakHoldsNoGradientUnits) {
  for (int zero : {0, 2, 3}) {
    LayoutInput in;
    in.dp = 3;
    in.zero = zero;
    StageCost s = Stage(1, 2, {1000, 700, 302});
    s.eval_bytes = 50000;  // above the step's 1100 + its units
    in.stages = {s};
    Result<Prediction> p = PredictLayout(in, Table(3));
    ASSERT_TRUE(p.ok());
    const StageMemory& m = p->memory[0];
    const int64_t states = m.params_bytes + m.grads_bytes + m.optimizer_bytes;
    EXPECT_EQ(m.activation_bytes, 50000) << zero;
    EXPECT_EQ(p->peak_bytes, states + 50000 + (zero == 3 ? 4 * (1000 + 700) : 0)) << zero;
    in.stages[0].eval_bytes = 1000;  // the step is the peak again: every unit counts
    p = PredictLayout(in, Table(3));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->peak_bytes, states + p->memory[0].in_flight_bytes + 1100) << zero;
  }
}

TEST(PlanStepModel, PipelineStagesHoldTheirMicroBatchesInFlight) {
  LayoutInput in;
  in.pp = 4;
  in.micros = 8;
  for (int s = 0; s < 4; ++s) in.stages.push_back(Stage(1, 2));
  in.schedule = parallel::PipeSchedule::k1F1B;
  Result<Prediction> p = PredictLayout(in, CommTable());
  ASSERT_TRUE(p.ok());
  // One buffer pool per micro-batch in flight, each holding saved (1000) + workspace (100).
  for (int s = 0; s < 4; ++s) EXPECT_EQ(p->memory[s].activation_bytes, (4 - s) * (1000 + 100)) << s;
  in.schedule = parallel::PipeSchedule::kGPipe;
  p = PredictLayout(in, CommTable());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->memory[3].activation_bytes, 8 * (1000 + 100));
}

TEST(PlanStepModel, EqualStagesGiveTheClosedFormMakespanAndBubble) {
  LayoutInput in;
  in.pp = 4;
  in.micros = 8;
  for (int s = 0; s < 4; ++s) in.stages.push_back(Stage(1, 2));
  Result<Prediction> p = PredictLayout(in, CommTable());  // no sends cost anything
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->pipeline_ms, (8 + 4 - 1) * 3.0, 1e-9);
  EXPECT_NEAR(p->bubble, 3.0 / 11.0, 1e-9);
  EXPECT_NEAR(p->compute_ms, 8 * 3.0, 1e-9);
  EXPECT_NEAR(p->step_ms, p->pipeline_ms, 1e-9);
}

TEST(PlanStepModel, OversubscribedPipelineSharesTheCoresAmongTheStagesThatRun) {
  // Four stages at fwd 1 + bwd 2 ms a micro-batch when every worker computes, with two workers
  // per core: 0.5 + 1 ms for a stage while at most two run (capacity: 4 stages / 2).
  LayoutInput in;
  in.pp = 4;
  in.micros = 1;
  in.oversubscription = 2;
  for (int s = 0; s < 4; ++s) in.stages.push_back(Stage(1, 2));
  // One micro-batch runs one op at a time, each at full speed: 4 x 0.5 + 4 x 1 ms, where the
  // shared speed throughout would take 12.
  Result<Prediction> p = PredictLayout(in, CommTable());
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->pipeline_ms, 6.0, 1e-9);
  // Sixteen: the work binds (4 stages x 16 x 1.5 ms over a capacity of 2 = 48 ms; the
  // own-core schedule would take 19 x 1.5 = 28.5), plus the fill and drain that run fewer
  // than two stages; the shared speed throughout would take 19 x 3 = 57.
  in.micros = 16;
  p = PredictLayout(in, CommTable());
  ASSERT_TRUE(p.ok());
  EXPECT_GT(p->pipeline_ms, 48.0);
  EXPECT_LT(p->pipeline_ms, 48.0 + 3 * 1.5);
  in.oversubscription = 1;  // a core each: the schedule as measured
  p = PredictLayout(in, CommTable());
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->pipeline_ms, (16 + 3) * 3.0, 1e-9);
}

TEST(PlanStepModel, AccumulationRunsEveryMicroBatchAndTheOptimizerCountsOwnedElements) {
  LayoutInput in;
  in.micros = 4;
  in.optimizer_ns_per_element = 1000;  // 1 us per element
  in.stages = {Stage(1, 2)};
  Result<Prediction> p = PredictLayout(in, CommTable());
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->compute_ms, 12.0, 1e-9);
  EXPECT_NEAR(p->optimizer_ms, 2001 * 1e-3, 1e-9);
  EXPECT_NEAR(p->step_ms, 12.0 + 2.001, 1e-9);
  in.dp = 2;
  in.zero = 1;  // the optimizer updates its shard (1001), then the shards are all-gathered
  const CommTable t = Table(2);
  p = PredictLayout(in, t);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->optimizer_ms, 1001 * 1e-3, 1e-9);
  EXPECT_GT(p->comm_exposed_ms, t.Ms(CommOp::kAllGather, 2, 4 * 1001 * 2) - 1e-12);
}

TEST(PlanStepModel, DdpHidesBucketsBehindBackwardExceptWhatFinishesAfterIt) {
  const CommTable t = Table(2);
  LayoutInput in;
  in.dp = 2;
  in.bucket_bytes = 1;           // one bucket per parameter
  in.stages = {Stage(1, 1000)};  // a long backward hides all but the last bucket
  Result<Prediction> p = PredictLayout(in, t);
  ASSERT_TRUE(p.ok());
  // The first parameter's gradient (1000 elements) is final only when backward ends.
  EXPECT_NEAR(p->comm_exposed_ms, t.Ms(CommOp::kAllreduce, 2, 4000), 1e-9);
  in.bucket_bytes = int64_t{25} << 20;  // one bucket: everything waits for the end
  p = PredictLayout(in, t);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->comm_exposed_ms, t.Ms(CommOp::kAllreduce, 2, 4 * 2001), 1e-9);
  EXPECT_NEAR(p->step_ms, 1001 + t.Ms(CommOp::kAllreduce, 2, 4 * 2001), 1e-9);
}

TEST(PlanStepModel, ZeroThreeGathersEveryUnitTwicePerMicroBatch) {
  const CommTable t = Table(2);
  LayoutInput in;
  in.dp = 2;
  in.zero = 3;
  in.micros = 2;
  in.stages = {Stage(0, 0)};  // no compute to hide anything behind
  Result<Prediction> p = PredictLayout(in, t);
  ASSERT_TRUE(p.ok());
  double gathers = 0, reduces = 0;
  for (int64_t n : {1000, 700, 301}) {
    gathers += t.Ms(CommOp::kAllGather, 2, 4 * ((n + 1) / 2) * 2);
    reduces += t.Ms(CommOp::kReduceScatter, 2, 4 * n);
  }
  EXPECT_NEAR(p->comm_exposed_ms, 2 * (2 * gathers + reduces), 1e-9);
  EXPECT_NEAR(p->comm_total_ms, 2 * (2 * gathers + reduces), 1e-9);
}

// Each step ends with the step record's all-gather over every rank (here dp=2 x tp=2: a group
// of 4; the record carries the gradient norm's parts, so no allreduce follows), added to the
// step and the exposed communication; one worker has no such collective.
TEST(PlanStepModel, StepSyncAddsTheWorldCollectivesOfEveryStep) {
  CommTable t = Table(2);
  t.Set(CommOp::kAllreduce, 4, Linear(0.3, 1.0));
  t.Set(CommOp::kAllGather, 4, Linear(0.2, 0.5));
  LayoutInput in;
  in.dp = 2;
  in.tp = 2;
  in.stages = {Stage(1, 2)};
  Result<Prediction> without = PredictLayout(in, t);
  in.step_stats_bytes = 2048;  // x 4 ranks: above the curve's first point, interpolated, not the floor
  Result<Prediction> with = PredictLayout(in, t);
  ASSERT_TRUE(without.ok() && with.ok());
  const double sync = t.Ms(CommOp::kAllGather, 4, 2048 * 4);
  EXPECT_GT(sync, t.Ms(CommOp::kAllGather, 4, 1024));
  EXPECT_NEAR(with->step_sync_ms, sync, 1e-12);
  EXPECT_NEAR(with->step_ms - without->step_ms, sync, 1e-12);
  EXPECT_NEAR(with->comm_exposed_ms - without->comm_exposed_ms, sync, 1e-12);
  in.dp = in.tp = 1;
  Result<Prediction> one = PredictLayout(in, t);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->step_sync_ms, 0);
}

// Accumulation (pp = 1): the first micro-batch at the piece's cold times, each further one at
// its warm pass's (fp32 or bf16, as the layout runs); a piece without warm passes (a GPT
// block) charges every micro-batch cold, and recompute runs the warm forward again in backward.
TEST(PlanStepModel, FurtherMicroBatchesCostTheWarmPass) {
  StagePieces pieces;
  pieces.has_embedding = true;
  pieces.embedding = {5, 10, 0, 0, 0};
  pieces.embedding.warm_fwd_ms = 4;
  pieces.embedding.warm_bwd_ms = 7;
  pieces.embedding.bf16_fwd_ms = 3;
  pieces.embedding.bf16_bwd_ms = 6;
  pieces.embedding.bf16_warm_fwd_ms = 2;
  pieces.embedding.bf16_warm_bwd_ms = 5;
  auto compute = [&](const ComputeOptions& o, int m) {
    StageCost s = ComposeStage(pieces, o);
    s.param_numels = {1000};
    s.units = {{0, 1}};
    LayoutInput in;
    in.micros = m;
    in.stages = {s};
    return PredictLayout(in, Table(2))->compute_ms;
  };
  for (int m : {1, 2, 4}) {
    EXPECT_DOUBLE_EQ(compute({}, m), 15 + (m - 1) * 11.0) << m;
    EXPECT_DOUBLE_EQ(compute({true, false, 1.0}, m), 9 + (m - 1) * 7.0) << m;
  }
  StageCost warm = ComposeStage(pieces, {});
  EXPECT_DOUBLE_EQ(warm.warm_fwd_ms, 4);
  EXPECT_DOUBLE_EQ(warm.warm_bwd_ms, 7);
  pieces.embedding.warm_fwd_ms = pieces.embedding.warm_bwd_ms = 0;  // not measured: cold throughout
  EXPECT_DOUBLE_EQ(compute({}, 3), 3 * 15.0);
  // Recompute (a block): backward runs the forward again, warm after the first micro-batch.
  StagePieces blocks;
  blocks.blocks = 2;
  blocks.block = {5, 10, 0, 0, 0};
  blocks.block.warm_fwd_ms = 4;
  blocks.block.warm_bwd_ms = 7;
  const StageCost rec = ComposeStage(blocks, {false, true, 1.0});
  EXPECT_DOUBLE_EQ(rec.bwd_ms, 2 * (10 + 5.0));
  EXPECT_DOUBLE_EQ(rec.warm_bwd_ms, 2 * (7 + 4.0));
}

// Recompute's forward releases what it saved (PieceCost::recompute_fwd_ms, fp32 or bf16 as the
// layout runs); its backward reruns the recorded forward (fwd_ms) and runs backward. Without the
// figure the forward is fwd_ms; a layout without recompute never takes it.
TEST(PlanStepModel, RecomputeForwardCostsTheReleasedForward) {
  StagePieces blocks;
  blocks.blocks = 3;
  blocks.block = {5, 10, 0, 0, 0};
  blocks.block.bf16_fwd_ms = 3;
  blocks.block.bf16_bwd_ms = 6;
  const StageCost unmeasured = ComposeStage(blocks, {false, true, 1.0});
  EXPECT_DOUBLE_EQ(unmeasured.fwd_ms, 3 * 5.0);
  blocks.block.recompute_fwd_ms = 4;
  blocks.block.bf16_recompute_fwd_ms = 2;
  const StageCost fp32 = ComposeStage(blocks, {false, true, 1.0});
  EXPECT_DOUBLE_EQ(fp32.fwd_ms, 3 * 4.0);
  EXPECT_DOUBLE_EQ(fp32.bwd_ms, 3 * (10 + 5.0));
  EXPECT_DOUBLE_EQ(fp32.warm_fwd_ms, 3 * 4.0);  // a block has no warm pass: the released forward again
  const StageCost bf16 = ComposeStage(blocks, {true, true, 1.0});
  EXPECT_DOUBLE_EQ(bf16.fwd_ms, 3 * 2.0);
  EXPECT_DOUBLE_EQ(bf16.bwd_ms, 3 * (6 + 3.0));
  EXPECT_DOUBLE_EQ(ComposeStage(blocks, {false, false, 1.0}).fwd_ms, 3 * 5.0);
  EXPECT_DOUBLE_EQ(ComposeStage(blocks, {true, false, 1.0}).fwd_ms, 3 * 3.0);
}

// PowerSGD: its three allreduces (uncompressed elements, P, Q) and the factorisation, none hidden
// behind backward; DiLoCo: the outer gradient's allreduce once in H steps. comm_bytes is the
// ring count of each (2 (p-1)/p of what one allreduce carries).
TEST(PlanStepModel, PowerSgdAndDilocoReplaceTheBucketsWithTheirOwnCollectives) {
  LayoutInput in;
  in.dp = 4;
  in.stages = {Stage(1, 2, {100000, 50000, 2000})};
  const CommTable table = Table(4);
  Result<Prediction> sync = PredictLayout(in, table);
  ASSERT_TRUE(sync.ok());
  EXPECT_DOUBLE_EQ(sync->dp_bytes, 2 * 0.75 * 4 * 152000);
  in.low_comm.kind = LayoutInput::LowComm::Kind::kPowerSgd;
  in.low_comm.plain = 2000;
  in.low_comm.p = 1200;
  in.low_comm.q = 800;
  in.low_comm.compress_ms = 5;
  Result<Prediction> psgd = PredictLayout(in, table);
  ASSERT_TRUE(psgd.ok());
  const double three = table.Ms(CommOp::kAllreduce, 4, 4 * 2000) + table.Ms(CommOp::kAllreduce, 4, 4 * 1200) +
                       table.Ms(CommOp::kAllreduce, 4, 4 * 800);
  EXPECT_NEAR(psgd->comm_exposed_ms - psgd->step_sync_ms, three + 5, 1e-9);
  EXPECT_DOUBLE_EQ(psgd->dp_bytes, 2 * 0.75 * 4 * 4000);
  in.low_comm.kind = LayoutInput::LowComm::Kind::kDiloco;
  in.low_comm.inner_steps = 50;
  in.low_comm.outer_bytes = 2;
  Result<Prediction> diloco = PredictLayout(in, table);
  ASSERT_TRUE(diloco.ok());
  EXPECT_NEAR(diloco->comm_exposed_ms - diloco->step_sync_ms, table.Ms(CommOp::kAllreduce, 4, 2 * 152000) / 50, 1e-9);
  EXPECT_DOUBLE_EQ(diloco->dp_bytes, 2 * 0.75 * 2 * 152000 / 50);
  // Streaming, 4 fragments: four allreduces of a quarter each in H steps, the same bytes.
  in.low_comm.fragments = 4;
  Result<Prediction> streaming = PredictLayout(in, table);
  ASSERT_TRUE(streaming.ok());
  const double quarter = table.Ms(CommOp::kAllreduce, 4, 2 * 152000 / 4);
  EXPECT_NEAR(streaming->comm_exposed_ms - streaming->step_sync_ms, 4 * quarter / 50, 1e-9);
  EXPECT_DOUBLE_EQ(streaming->dp_bytes, diloco->dp_bytes);
  // Overlapped by tau steps of compute (0.03 ms a step here): only what outlasts them is
  // exposed, nothing once tau steps take longer than an exchange.
  in.stages[0].fwd_ms = 0.01;
  in.stages[0].bwd_ms = 0.02;
  ASSERT_GT(quarter, 0.03);
  in.low_comm.overlap_steps = 1;
  Result<Prediction> overlapped = PredictLayout(in, table);
  ASSERT_TRUE(overlapped.ok());
  EXPECT_NEAR(overlapped->comm_exposed_ms - overlapped->step_sync_ms, 4 * (quarter - 0.03) / 50, 1e-9);
  in.low_comm.overlap_steps = 49;
  Result<Prediction> hidden = PredictLayout(in, table);
  ASSERT_TRUE(hidden.ok());
  EXPECT_NEAR(hidden->comm_exposed_ms - hidden->step_sync_ms, 0, 1e-9);
}

}  // namespace
}  // namespace lockstep::planner
