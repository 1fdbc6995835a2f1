// The straggler detector and the pipeline stage balance (runtime/metrics/straggler.h), on
// made-up per-rank times: who is named, when, and only once.
#include "lockstep/runtime/metrics/straggler.h"

#include <gtest/gtest.h>

namespace lockstep::runtime {
namespace {

// Per-rank compute times of one step: 10 ms each, with a deterministic wobble of up to +-15%
// (a busy machine), rank `slow` (if any) `factor` times as long.
std::vector<double> StepTimes(int world, int step, int slow, double factor) {
  std::vector<double> t(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const double wobble = 1.0 + 0.15 * (((step * 7 + r * 13) % 11) - 5) / 5.0;
    t[static_cast<size_t>(r)] = 10.0 * wobble * (r == slow ? factor : 1.0);
  }
  return t;
}

TEST(StragglerDetector, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({}), 0);
}

TEST(StragglerDetector, ASlowRankIsNamedOnceWhenItsWindowIsFull) {
  StragglerDetector d(1.2, 20);
  const std::vector<int> one_group(4, 0);
  std::vector<int> named_at;
  for (int step = 0; step < 60; ++step) {
    for (const Straggler& s : d.Observe(StepTimes(4, step, 2, 2.0), one_group)) {
      EXPECT_EQ(s.rank, 2);
      EXPECT_GT(s.ratio, 1.6);
      EXPECT_LT(s.ratio, 2.4);
      EXPECT_GT(s.compute_ms, 1.6 * s.median_ms);
      named_at.push_back(step);
    }
  }
  EXPECT_EQ(named_at, std::vector<int>({19}));  // the 20th step observed, and not again
}

TEST(StragglerDetector, NoSlowRankNamesNobodyDespiteNoisySteps) {
  StragglerDetector d(1.2, 20);
  for (int step = 0; step < 200; ++step) {
    std::vector<double> t = StepTimes(4, step, -1, 1.0);
    t[static_cast<size_t>(step % 4)] *= step % 3 == 0 ? 3.0 : 1.0;  // a descheduled rank now and then
    EXPECT_TRUE(d.Observe(t, std::vector<int>(4, 0)).empty()) << "step " << step;
  }
}

TEST(StragglerDetector, RankIsNamedAgainOnlyAfterItRecovered) {
  StragglerDetector d(1.2, 4);
  const std::vector<int> groups(3, 0);
  int named = 0;
  auto run = [&](int steps, double factor) {
    for (int i = 0; i < steps; ++i) named += static_cast<int>(d.Observe({10, 10 * factor, 10}, groups).size());
  };
  run(10, 2.0);
  EXPECT_EQ(named, 1);
  run(10, 1.0);  // recovers: its window falls back below the ratio
  EXPECT_EQ(named, 1);
  run(10, 2.0);
  EXPECT_EQ(named, 2);
}

TEST(StragglerDetector, RanksAreComparedWithinTheirPeerGroupOnly) {
  // Two pipeline stages: stage 1 is twice as costly as stage 0 by design, nobody straggles;
  // a rank alone in its group has nobody to compare with.
  StragglerDetector d(1.2, 5);
  for (int step = 0; step < 20; ++step) {
    EXPECT_TRUE(d.Observe({10, 10, 20, 20}, {0, 0, 1, 1}).empty());
    EXPECT_TRUE(d.Observe({10, 10, 40}, {0, 0, 1}).empty());
  }
  StragglerDetector within(1.2, 5);
  std::vector<Straggler> named;
  for (int step = 0; step < 5; ++step) named = within.Observe({10, 10, 20, 40, 20}, {0, 0, 1, 1, 1});
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].rank, 3);
  EXPECT_DOUBLE_EQ(named[0].ratio, 2.0);
}

TEST(StragglerDetector, StageBalanceAgainstTheEstimate) {
  StageBalanceMeter m;
  // Two stages, dp=2: ranks 0,1 are stage 0, ranks 2,3 stage 1 (averaged within a stage).
  for (int step = 0; step < 3; ++step) m.Add({10, 14, 36, 36}, {0, 0, 1, 1});
  EXPECT_EQ(m.steps(), 3);
  const StageBalance b = m.Compare({1.0, 1.0});  // the partitioner expected equal stages
  ASSERT_EQ(b.measured_share.size(), 2u);
  EXPECT_DOUBLE_EQ(b.measured_share[0], 0.25);
  EXPECT_DOUBLE_EQ(b.measured_share[1], 0.75);
  EXPECT_DOUBLE_EQ(b.estimated_share[1], 0.5);
  EXPECT_DOUBLE_EQ(b.measured_imbalance, 0.5);  // 36 / mean(12, 36) - 1
  EXPECT_EQ(b.worst_stage, 0);                  // 0.25 against 0.5: 50% off
  EXPECT_DOUBLE_EQ(b.worst_error, 0.5);
  const StageBalance right = m.Compare({1.0, 3.0});
  EXPECT_NEAR(right.worst_error, 0.0, 1e-12);
}

}  // namespace
}  // namespace lockstep::runtime
