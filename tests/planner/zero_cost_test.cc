// ZeRO-2/3's communication in the step model when the profile measured it: the measured cost
// per micro-batch and element replaces the overlap model, workers sharing cores pay for their
// largest units, and further micro-batches cost what the M-micro-batch step measured beyond
// the first.
#include <gtest/gtest.h>

#include "lockstep/planner/planner.h"
#include "lockstep/planner/profile.h"
#include "lockstep/planner/step_model.h"
#include "planner/planner_test_util.h"

namespace lockstep::planner {
namespace {

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

}  // namespace
}  // namespace lockstep::planner
