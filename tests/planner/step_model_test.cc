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

namespace lockstep::planner {
namespace {

CommCurve Linear(double latency_ms, double ms_per_mb) {
  CommCurve c;
  for (int64_t b = 1024; b <= (int64_t{64} << 20); b *= 4)
    c.Add(b, latency_ms + ms_per_mb * static_cast<double>(b) / 1048576.0);
  return c;
}

CommTable Table(int group) {
  CommTable t;
  t.Set(CommOp::kAllreduce, group, Linear(0.1, 1.0));
  t.Set(CommOp::kReduceScatter, group, Linear(0.1, 0.5));
  t.Set(CommOp::kAllGather, group, Linear(0.1, 0.5));
  t.Set(CommOp::kSend, 2, Linear(0.05, 0.25));
  return t;
}

// A stage of three parameters (one ZeRO unit each) computing fwd/bwd ms per micro-batch.
StageCost Stage(double fwd, double bwd, std::vector<int64_t> numels = {1000, 700, 301}) {
  StageCost s;
  s.fwd_ms = fwd;
  s.bwd_ms = bwd;
  s.saved_bytes = 1000;
  s.workspace_bytes = 100;
  s.param_numels = numels;
  for (int i = 0; i < static_cast<int>(numels.size()); ++i) s.units.push_back({i, i + 1});
  return s;
}

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

// Profiled on this machine, ZeRO-2/3's exposed cost is what the profile measured per micro-batch
// and parameter element (collectives on the cores that compute do not hide behind backward);
// the total stays the collectives' curves, and ZeRO-2 still all-gathers after the optimizer.
TEST(PlanStepModel, MeasuredZeroCostReplacesTheOverlapModel) {
  const CommTable t = Table(2);
  StagePieces pieces;
  pieces.has_embedding = true;
  pieces.embedding = {5, 10, 0, 0, 0};
  pieces.embedding.zero_ns_per_element[0] = 2000;  // ZeRO-2: 2 us per element and micro-batch
  pieces.embedding.zero_ns_per_element[1] = 5000;
  StageCost s = ComposeStage(pieces, {});
  EXPECT_DOUBLE_EQ(s.zero_ns_per_element[1], 5000);
  s.param_numels = {1000, 700, 301};
  s.units = {{0, 1}, {1, 2}, {2, 3}};
  LayoutInput in;
  in.dp = 2;
  in.micros = 3;
  in.stages = {s};
  in.zero = 3;
  Result<Prediction> z3 = PredictLayout(in, t);
  ASSERT_TRUE(z3.ok());
  EXPECT_NEAR(z3->comm_exposed_ms, 3 * 5000e-6 * 2001, 1e-9);
  in.zero = 2;
  Result<Prediction> z2 = PredictLayout(in, t);
  ASSERT_TRUE(z2.ok());
  EXPECT_NEAR(z2->comm_exposed_ms, 3 * 2000e-6 * 2001 + t.Ms(CommOp::kAllGather, 2, 4 * 1001 * 2), 1e-9);
  // Not measured: the overlap model. The first unit's gradient is final when the 10 ms backward
  // ends, the others' reductions are hidden before that.
  in.stages[0].zero_ns_per_element[0] = 0;
  Result<Prediction> modelled = PredictLayout(in, t);
  ASSERT_TRUE(modelled.ok());
  EXPECT_NEAR(modelled->comm_exposed_ms,
              3 * t.Ms(CommOp::kReduceScatter, 2, 4 * 1000) + t.Ms(CommOp::kAllGather, 2, 4 * 1001 * 2), 1e-9);
}

// Workers sharing cores: a ZeRO-3 micro-batch costs the measured figure for two of the largest
// units (the first forward and backward gathers), not for every element; ZeRO-2 and a worker
// per core keep the per-element figure.
TEST(PlanStepModel, OversubscribedZeroThreeCostsTwoUnitsAMicroBatch) {
  StageCost s = Stage(5, 10, {1000, 1000, 1000, 1000});
  s.zero_ns_per_element[0] = 2000;
  s.zero_ns_per_element[1] = 5000;
  LayoutInput in;
  in.dp = 4;
  in.micros = 3;
  in.zero = 3;
  in.stages = {s};
  const CommTable t = Table(4);
  Result<Prediction> core_each = PredictLayout(in, t);
  in.oversubscription = 2;
  Result<Prediction> shared = PredictLayout(in, t);
  in.zero = 2;
  Result<Prediction> zero2 = PredictLayout(in, t);
  ASSERT_TRUE(core_each.ok() && shared.ok() && zero2.ok());
  EXPECT_NEAR(core_each->comm_exposed_ms, 3 * 5000e-6 * 4000, 1e-9);
  EXPECT_NEAR(shared->comm_exposed_ms, 3 * 5000e-6 * 2000, 1e-9);
  EXPECT_NEAR(zero2->comm_exposed_ms, 3 * 2000e-6 * 4000 + t.Ms(CommOp::kAllGather, 4, 4 * 1000 * 4), 1e-9);
}

// In a pipeline with 4 workers a core or more: one of the two first-unit gathers goes by while a
// stage waits for its neighbours, so a micro-batch costs the largest unit of the stage that costs
// most; with 2 a core, two units as without a pipeline.
TEST(PlanStepModel, OversubscribedPipelineZeroThreeCostsOneUnitAMicroBatch) {
  LayoutInput in;
  in.dp = 2;
  in.pp = 2;
  in.micros = 4;
  in.zero = 3;
  in.oversubscription = 4;
  in.stages = {Stage(5, 10, {1000, 600, 500}), Stage(5, 10, {900, 900})};
  for (StageCost& s : in.stages) s.zero_ns_per_element[1] = 5000;
  const CommTable t = Table(2);
  Result<Prediction> pipeline = PredictLayout(in, t);
  ASSERT_TRUE(pipeline.ok());
  EXPECT_NEAR(pipeline->comm_exposed_ms, 4 * 5000e-6 * 1000, 1e-9);  // not 1600 (stage 0's two) or 1800
  in.oversubscription = 2;  // two workers a core: the first unit's two gathers, as without a pipeline
  Result<Prediction> two_a_core = PredictLayout(in, t);
  ASSERT_TRUE(two_a_core.ok());
  EXPECT_NEAR(two_a_core->comm_exposed_ms, 4 * 5000e-6 * 1800, 1e-9);  // stage 1's two
  in.oversubscription = 1;  // a core each: every element, as without a pipeline
  Result<Prediction> core_each = PredictLayout(in, t);
  ASSERT_TRUE(core_each.ok());
  EXPECT_NEAR(core_each->comm_exposed_ms, 4 * 5000e-6 * 2100, 1e-9);
}

// Measured over a step of kZeroOverlapMicros micro-batches too (mpi plans): the first
// micro-batch costs the one-micro-batch figure, each further one what the M-micro-batch step
// measured beyond it; one micro-batch, or no overlap figure, keeps m x the first figure.
TEST(PlanStepModel, ZeroOverlapFigureChargesTheFurtherMicroBatches) {
  StagePieces pieces;
  pieces.has_embedding = true;
  pieces.embedding = {5, 10, 0, 0, 0};
  pieces.embedding.zero_ns_per_element[0] = 100;
  pieces.embedding.zero_overlap_ns_per_element[0] = 400;
  StageCost s = ComposeStage(pieces, {});
  EXPECT_DOUBLE_EQ(s.zero_overlap_ns_per_element[0], 400);
  s.param_numels = {1000};
  s.units = {{0, 1}};
  LayoutInput in;
  in.dp = 4;
  in.zero = 2;
  in.stages = {s};
  const CommTable t = Table(4);
  const double gather = t.Ms(CommOp::kAllGather, 4, 4 * 250 * 4);
  constexpr int M = kZeroOverlapMicros;
  const double further = (M * 400.0 - 100.0) / (M - 1);  // ns per element for each micro-batch after the first
  for (int m : {1, 2, 3, 4, 6}) {
    in.micros = m;
    Result<Prediction> p = PredictLayout(in, t);
    ASSERT_TRUE(p.ok());
    EXPECT_NEAR(p->comm_exposed_ms, (100.0 + (m - 1) * further) * 1000 * 1e-6 + gather, 1e-9) << m;
  }
  // At M micro-batches the step costs M x the overlap figure, as measured.
  in.micros = M;
  EXPECT_NEAR(PredictLayout(in, t)->comm_exposed_ms, M * 400.0 * 1000 * 1e-6 + gather, 1e-9);
  in.stages[0].zero_overlap_ns_per_element[0] = 0;
  in.micros = 3;
  EXPECT_NEAR(PredictLayout(in, t)->comm_exposed_ms, 3 * 100.0 * 1000 * 1e-6 + gather, 1e-9);
  // An overlap figure below the lone micro-batch's charges nothing more (never negative).
  in.stages[0].zero_overlap_ns_per_element[0] = 10;
  EXPECT_NEAR(PredictLayout(in, t)->comm_exposed_ms, 100.0 * 1000 * 1e-6 + gather, 1e-9);
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

// Layouts predicted within 3% of the fastest that fits are a tie, and the simplest of them (the
// least tp x pp, then the lowest ZeRO stage, then fewer micro-batches, then no recompute) is
// recommended and goes to the top; the rest keep their order. A tie never reaches past one worker's step.
TEST(PlanDecide, RecommendsTheSimplestLayoutTiedWithTheFastest) {
  auto row = [](int zero, int micros, double step_ms, int64_t peak = 100) {
    PlanRow r;
    r.candidate.dims.dp = 2;
    r.candidate.zero = zero;
    r.candidate.micros = micros;
    r.prediction.step_ms = step_ms;
    r.prediction.peak_bytes = peak;
    return r;
  };
  const std::vector<PlanRow> rows = {row(2, 1, 10.0), row(1, 1, 10.1), row(0, 2, 10.2), row(0, 1, 10.5),
                                     row(0, 1, 9.0, 1000)};
  PlanResult r = Decide(2, false, 500, 500, rows, {});
  ASSERT_EQ(r.recommended, 0);
  std::vector<std::pair<int, double>> order;
  for (const PlanRow& x : r.rows) order.push_back({x.candidate.zero, x.prediction.step_ms});
  EXPECT_EQ(order, (std::vector<std::pair<int, double>>{{0, 10.2}, {2, 10.0}, {1, 10.1}, {0, 10.5}, {0, 9.0}}));
  EXPECT_FALSE(r.rows.back().fits);
  EXPECT_EQ(r.binding, "memory");  // the layout that does not fit is faster than the fastest that does
  // One worker at 10.15 ms: the ZeRO-0 row (10.2) would be slower than it, so ZeRO-1.
  r = Decide(2, false, 500, 500, rows, {row(0, 1, 10.15)});
  EXPECT_EQ(r.rows[0].candidate.zero, 1);
  EXPECT_FALSE(r.one_worker_faster);
  // Model parallelism before everything: dp=2 with ZeRO-2 before dp=1,pp=2 with ZeRO-0.
  PlanRow piped = row(0, 1, 10.0);
  piped.candidate.dims.dp = 1;
  piped.candidate.dims.pp = 2;
  r = Decide(2, false, 500, 500, {piped, row(2, 2, 10.1)}, {});
  EXPECT_EQ(r.rows[0].candidate.dims.pp, 1);
  // Outside the tie the fastest stays on top.
  r = Decide(2, false, 500, 500, {row(2, 1, 10.0), row(0, 1, 10.4)}, {});
  EXPECT_EQ(r.rows[0].candidate.zero, 2);
  EXPECT_EQ(r.binding, "compute");
}

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
    c.stages = {StageLayout{true, true, 2, {100, 200, 200, 50}, {{0, 1}, {1, 2}, {2, 3}, {3, 4}}},
                StageLayout{true, false, 2, {100, 200, 200}, {{0, 1}, {1, 2}, {2, 3}}}};
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
  c.stages = {StageLayout{true, true, 2, {100, 200, 200, 50}, {{0, 1}, {1, 2}, {2, 3}, {3, 4}}}};
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
