// Choosing among the predicted layouts: the simplest of those tied with the fastest that fits.
#include <gtest/gtest.h>

#include "lockstep/planner/planner.h"
#include "lockstep/planner/profile.h"
#include "lockstep/planner/step_model.h"
#include "planner/planner_test_util.h"

namespace lockstep::planner {
namespace {

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

}  // namespace
}  // namespace lockstep::planner
