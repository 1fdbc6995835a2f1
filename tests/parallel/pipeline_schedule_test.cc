// Pipeline planning: the per-stage op orders of GPipe and 1F1B (each micro-batch once
// forward and once backward, forward first, in-flight bounded by MaxInFlight), the
// simulation (bubble = (p-1)/(m+p-1) for equal stages, dependencies honoured, deadlocks
// reported), and the stage balancer (optimal against brute force, its tie rule, errors).
#include "lockstep/parallel/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

namespace lockstep::parallel {
namespace {

using Kind = PipeOp::Kind;
constexpr PipeSchedule kBoth[] = {PipeSchedule::kGPipe, PipeSchedule::k1F1B};

std::string Names(const std::vector<PipeOp>& ops) {
  std::string s;
  for (const PipeOp& op : ops) {
    if (!s.empty()) s += ' ';
    s += PipeOpName(op);
  }
  return s;
}

TEST(PipeSchedule, ParsesNamesAndRejectsOthers) {
  for (PipeSchedule s : kBoth) {
    auto parsed = ParsePipeSchedule(PipeScheduleName(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_STREQ(PipeScheduleName(PipeSchedule::k1F1B), "1f1b");
  auto bad = ParsePipeSchedule("x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "train.pp_schedule: 'x' is not one of gpipe, 1f1b");
}

TEST(StageSchedule, KnownOrders) {
  EXPECT_EQ(Names(StageSchedule(PipeSchedule::kGPipe, 3, 1, 3)), "F0 F1 F2 B0 B1 B2");
  // Megatron's order for 4 stages, 6 micro-batches: warmup 3 / 2 / 1 / 0 forwards.
  EXPECT_EQ(Names(StageSchedule(PipeSchedule::k1F1B, 4, 0, 6)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(Names(StageSchedule(PipeSchedule::k1F1B, 4, 2, 6)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(Names(StageSchedule(PipeSchedule::k1F1B, 4, 3, 6)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than the warmup: all forwards, then all backwards.
  EXPECT_EQ(Names(StageSchedule(PipeSchedule::k1F1B, 8, 0, 2)), "F0 F1 B0 B1");
  EXPECT_TRUE(StageSchedule(PipeSchedule::k1F1B, 4, 4, 6).empty());
  EXPECT_TRUE(StageSchedule(PipeSchedule::kGPipe, 0, 0, 6).empty());
  EXPECT_TRUE(StageSchedule(PipeSchedule::kGPipe, 2, 0, 0).empty());
}

TEST(StageSchedule, EachMicroOnceForwardThenBackwardAndInFlightBounded) {
  for (PipeSchedule sched : kBoth)
    for (int p = 1; p <= 8; ++p)
      for (int s = 0; s < p; ++s)
        for (int m = 1; m <= 16; ++m) {
          SCOPED_TRACE(std::string(PipeScheduleName(sched)) + " p=" + std::to_string(p) + " s=" + std::to_string(s) +
                       " m=" + std::to_string(m));
          std::vector<PipeOp> ops = StageSchedule(sched, p, s, m);
          ASSERT_EQ(ops.size(), 2u * m);
          std::vector<int> forwards(m, 0), backwards(m, 0);
          int in_flight = 0, max_in_flight = 0, next_backward = 0;
          for (const PipeOp& op : ops) {
            ASSERT_GE(op.micro, 0);
            ASSERT_LT(op.micro, m);
            if (op.kind == Kind::kForward) {
              ++forwards[op.micro];
              max_in_flight = std::max(max_in_flight, ++in_flight);
            } else {
              ASSERT_EQ(forwards[op.micro], 1) << "B" << op.micro << " before its forward";
              ++backwards[op.micro];
              --in_flight;
              EXPECT_EQ(op.micro, next_backward++) << "backwards must run in micro-batch order";
            }
          }
          EXPECT_EQ(forwards, std::vector<int>(m, 1));
          EXPECT_EQ(backwards, std::vector<int>(m, 1));
          EXPECT_EQ(max_in_flight, MaxInFlight(sched, p, s, m));
        }
  EXPECT_EQ(MaxInFlight(PipeSchedule::k1F1B, 4, 0, 16), 4);
  EXPECT_EQ(MaxInFlight(PipeSchedule::k1F1B, 4, 3, 16), 1);
  EXPECT_EQ(MaxInFlight(PipeSchedule::kGPipe, 4, 3, 16), 16);
}

std::vector<double> Same(int p, double v) { return std::vector<double>(p, v); }

TEST(SimulatePipeline, EqualStagesGiveTheBubbleFormula) {
  const std::pair<int, int> cases[] = {{1, 1}, {1, 8}, {2, 1}, {4, 1},  {4, 2},  {4, 4},
                                       {4, 8}, {8, 3}, {8, 8}, {8, 16}, {3, 32}, {6, 5}};
  // Backward = 2x forward is the usual transformer ratio; the formula holds for any.
  for (double backward : {2.0, 1.0, 0.5, 3.0})
    for (PipeSchedule sched : kBoth)
      for (auto [p, m] : cases) {
        SCOPED_TRACE(std::string(PipeScheduleName(sched)) + " p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " backward=" + std::to_string(backward));
        auto sim = SimulatePipeline(sched, m, Same(p, 1.0), Same(p, backward));
        ASSERT_TRUE(sim.ok()) << sim.status().ToString();
        EXPECT_NEAR(sim->makespan, (1 + backward) * (m + p - 1), 1e-9);
        EXPECT_NEAR(sim->mean_bubble, BubbleFormula(p, m), 1e-9);
        for (int s = 0; s < p; ++s) {
          EXPECT_NEAR(sim->busy[s], (1 + backward) * m, 1e-9);
          EXPECT_NEAR(sim->bubble[s], BubbleFormula(p, m), 1e-9);
        }
      }
  EXPECT_DOUBLE_EQ(BubbleFormula(4, 8), 3.0 / 11);
  EXPECT_EQ(BubbleFormula(1, 5), 0);
}

TEST(SimulatePipeline, CommunicationAddsLatencyOnBothPasses) {
  // GPipe, unit forward, double backward: the forward wave and the backward wave each
  // cross p-1 links.
  const int p = 4, m = 6;
  const double comm = 0.25;
  auto sim = SimulatePipeline(PipeSchedule::kGPipe, m, Same(p, 1.0), Same(p, 2.0), comm);
  ASSERT_TRUE(sim.ok());
  EXPECT_NEAR(sim->makespan, 3.0 * (m + p - 1) + 2.0 * (p - 1) * comm, 1e-9);
  EXPECT_NEAR(sim->busy[0], 3.0 * m, 1e-9);  // waiting for a message is not busy
}

// Every span starts after its dependencies (plus comm), ops on a stage do not overlap and
// run in schedule order, and the totals add up.
void ExpectConsistent(const PipeSimulation& sim, PipeSchedule sched, int m, const std::vector<double>& f,
                      const std::vector<double>& b, double comm) {
  const int p = static_cast<int>(f.size());
  auto end_of = [&](int s, PipeOp op) {
    for (const PipeOpSpan& span : sim.spans[s])
      if (span.op == op) return span.end;
    ADD_FAILURE() << "stage " << s << " never ran " << PipeOpName(op);
    return 0.0;
  };
  for (int s = 0; s < p; ++s) {
    std::vector<PipeOp> order = StageSchedule(sched, p, s, m);
    ASSERT_EQ(sim.spans[s].size(), order.size());
    double free_at = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const PipeOpSpan& span = sim.spans[s][k];
      EXPECT_EQ(span.op, order[k]);
      EXPECT_GE(span.start, free_at - 1e-12);
      EXPECT_NEAR(span.end - span.start, span.op.kind == Kind::kForward ? f[s] : b[s], 1e-12);
      if (span.op.kind == Kind::kForward && s > 0) {
        EXPECT_GE(span.start, end_of(s - 1, span.op) + comm - 1e-12);
      }
      if (span.op.kind == Kind::kBackward) {
        EXPECT_GE(span.start, end_of(s, {Kind::kForward, span.op.micro}) - 1e-12);
        if (s + 1 < p) {
          EXPECT_GE(span.start, end_of(s + 1, span.op) + comm - 1e-12);
        }
      }
      free_at = span.end;
    }
    EXPECT_LE(free_at, sim.makespan + 1e-12);
    EXPECT_NEAR(sim.busy[s], m * (f[s] + b[s]), 1e-9);
  }
}

TEST(SimulatePipeline, NeverDeadlocksAndHonoursDependencies) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.5, 3.0);
  for (PipeSchedule sched : kBoth)
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 16; ++m) {
        std::vector<double> f(p), b(p);
        for (int s = 0; s < p; ++s) f[s] = cost(rng), b[s] = cost(rng);
        double comm = (m % 3) * 0.1;
        auto sim = SimulatePipeline(sched, m, f, b, comm);
        ASSERT_TRUE(sim.ok()) << PipeScheduleName(sched) << " p=" << p << " m=" << m << ": " << sim.status().ToString();
        ExpectConsistent(*sim, sched, m, f, b, comm);
      }
}

TEST(SimulatePipeline, SlowestStageHasTheSmallestBubble) {
  std::vector<double> f = {1, 1, 2, 1}, b = {2, 2, 4, 2};
  for (PipeSchedule sched : kBoth) {
    auto sim = SimulatePipeline(sched, 8, f, b);
    ASSERT_TRUE(sim.ok());
    EXPECT_GE(sim->makespan, 8 * 6.0);
    for (int s : {0, 1, 3}) EXPECT_LT(sim->bubble[2], sim->bubble[s]);
    EXPECT_GT(sim->mean_bubble, BubbleFormula(4, 8));  // imbalance costs more than the fill
  }
}

TEST(SimulatePipeline, ReportsDeadlocks) {
  auto F = [](int i) { return PipeOp{Kind::kForward, i}; };
  auto B = [](int i) { return PipeOp{Kind::kBackward, i}; };
  // The last stage asks for a backward before it ran the forward.
  auto own = SimulatePipeline({{F(0), B(0)}, {B(0), F(0)}}, 1, Same(2, 1), Same(2, 2));
  ASSERT_FALSE(own.ok());
  EXPECT_EQ(own.status().code(), StatusCode::kInternal);
  EXPECT_EQ(own.status().message(),
            "pipeline schedule deadlocks: stage 0 at B0 waits for B0 of stage 1, "
            "stage 1 at B0 waits for F0 (later in its own order)");
  // A cycle across stages: stage 0 wants B0 before sending F1, stage 1 wants F1 before B0.
  auto cycle = SimulatePipeline({{F(0), B(0), F(1), B(1)}, {F(0), F(1), B(0), B(1)}}, 2, Same(2, 1), Same(2, 2));
  ASSERT_FALSE(cycle.ok());
  EXPECT_EQ(
      cycle.status().message(),
      "pipeline schedule deadlocks: stage 0 at B0 waits for B0 of stage 1, stage 1 at F1 waits for F1 of stage 0");
  // The same ops in the 1F1B order finish.
  EXPECT_TRUE(SimulatePipeline({{F(0), F(1), B(0), B(1)}, {F(0), B(0), F(1), B(1)}}, 2, Same(2, 1), Same(2, 2)).ok());
}

TEST(SimulatePipeline, RejectsMalformedInput) {
  auto F = [](int i) { return PipeOp{Kind::kForward, i}; };
  auto B = [](int i) { return PipeOp{Kind::kBackward, i}; };
  auto message = [](const Result<PipeSimulation>& r) {
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(message(SimulatePipeline({{F(0), B(0)}}, 2, Same(1, 1), Same(1, 1))),
            "SimulatePipeline: stage 0's ops lack F1");
  EXPECT_EQ(message(SimulatePipeline({{F(0), B(0), B(0)}}, 1, Same(1, 1), Same(1, 1))),
            "SimulatePipeline: stage 0's ops hold B0 twice");
  EXPECT_EQ(message(SimulatePipeline({{F(0), B(3)}}, 1, Same(1, 1), Same(1, 1))),
            "SimulatePipeline: stage 0's ops name micro-batch 3, outside 0..0");
  EXPECT_EQ(message(SimulatePipeline(PipeSchedule::kGPipe, 4, Same(2, 1), Same(3, 1))),
            "SimulatePipeline: 2 stages but 2 forward and 3 backward times");
  EXPECT_EQ(message(SimulatePipeline(PipeSchedule::kGPipe, 4, {1, -1}, Same(2, 1))),
            "SimulatePipeline: forward_time[1] = -1; times must be finite and >= 0");
  EXPECT_EQ(message(SimulatePipeline(PipeSchedule::kGPipe, 0, Same(2, 1), Same(2, 1))),
            "SimulatePipeline: micros = 0; need >= 1");
  EXPECT_EQ(message(SimulatePipeline(PipeSchedule::kGPipe, 4, {}, {})), "SimulatePipeline: no stages");
  EXPECT_EQ(message(SimulatePipeline(PipeSchedule::kGPipe, 4, Same(2, 1), Same(2, 1), -0.5)),
            "SimulatePipeline: comm = -0.5; must be finite and >= 0");
}

// All partitions of n layers into p non-empty contiguous stages, begin vectors in
// lexicographic order.
void ForEachPartition(int n, int p, const std::function<void(const std::vector<int>&)>& visit) {
  std::vector<int> begin = {0};
  std::function<void()> extend = [&] {
    int s = static_cast<int>(begin.size()) - 1;  // the stage being placed
    if (s == p - 1) {
      begin.push_back(n);
      visit(begin);
      begin.pop_back();
      return;
    }
    for (int e = begin.back() + 1; e <= n - (p - 1 - s); ++e) {
      begin.push_back(e);
      extend();
      begin.pop_back();
    }
  };
  extend();
}

double MaxCost(const std::vector<int>& begin, const std::vector<double>& layer, double first, double last) {
  int p = static_cast<int>(begin.size()) - 1;
  double worst = 0;
  for (int s = 0; s < p; ++s) {
    double c = (s == 0 ? first : 0) + (s == p - 1 ? last : 0);
    for (int i = begin[s]; i < begin[s + 1]; ++i) c += layer[i];
    worst = std::max(worst, c);
  }
  return worst;
}

TEST(BalanceStages, OptimalAgainstBruteForceWithEarliestBoundariesOnTies) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    int n = 1 + static_cast<int>(rng() % 9);
    int p = 1 + static_cast<int>(rng() % n);
    // Half the trials use small integers, which tie often and sum exactly, so the tie
    // rule can be checked with ==; the rest use fractions.
    bool integral = trial % 2 == 0;
    auto draw = [&] { return integral ? static_cast<double>(rng() % 4) : std::uniform_real_distribution<>(0, 5)(rng); };
    std::vector<double> layer(n);
    for (double& c : layer) c = draw();
    double first = draw(), last = draw();
    SCOPED_TRACE("trial " + std::to_string(trial) + " n=" + std::to_string(n) + " p=" + std::to_string(p));

    double best = 1e300;
    std::vector<int> first_best;
    ForEachPartition(n, p, [&](const std::vector<int>& begin) {
      double c = MaxCost(begin, layer, first, last);
      if (c < best - (integral ? 0 : 1e-9)) best = c, first_best = begin;
    });
    auto part = BalanceStages(layer, first, last, p);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    ASSERT_EQ(part->begin.size(), static_cast<size_t>(p + 1));
    EXPECT_EQ(part->begin.front(), 0);
    EXPECT_EQ(part->begin.back(), n);
    for (int s = 0; s < p; ++s) EXPECT_LT(part->begin[s], part->begin[s + 1]);
    double total = first + last, worst = 0;
    for (int s = 0; s < p; ++s) {
      double c = (s == 0 ? first : 0) + (s == p - 1 ? last : 0);
      for (int i = part->begin[s]; i < part->begin[s + 1]; ++i) c += layer[i];
      EXPECT_NEAR(part->cost[s], c, 1e-9);
      worst = std::max(worst, c);
    }
    for (double c : layer) total += c;
    EXPECT_NEAR(worst, best, 1e-9);
    EXPECT_NEAR(part->imbalance, total > 0 ? worst / (total / p) - 1 : 0, 1e-9);
    if (integral) {
      EXPECT_EQ(part->begin, first_best);
    }
  }
}

TEST(BalanceStages, TieGoesToEarlierBoundaries) {
  auto part = BalanceStages({1, 1, 1}, 0, 0, 2);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->begin, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(part->cost, (std::vector<double>{1, 2}));
}

TEST(BalanceStages, RejectsImpossibleLayouts) {
  auto message = [](const Result<StagePartition>& r) {
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(message(BalanceStages({1, 1, 1, 1}, 0, 0, 8)),
            "--layout pp=8: the model has 4 layers; each pipeline stage needs at least one (use pp <= 4)");
  EXPECT_EQ(message(BalanceStages({1}, 0, 0, 2)),
            "--layout pp=2: the model has 1 layer; each pipeline stage needs at least one (use pp <= 1)");
  EXPECT_EQ(message(BalanceStages({1, 1}, 0, 0, 0)),
            "--layout pp=0: a pipeline needs at least one stage (use pp >= 1)");
  EXPECT_EQ(message(BalanceStages({}, 0, 0, 1)), "--layout pp=1: the model has no layers to place on pipeline stages");
  EXPECT_EQ(message(BalanceStages({1, -2}, 0, 0, 1)),
            "BalanceStages: layer 1 has cost -2; costs must be finite and >= 0");
}

TEST(DescribePartition, NamesLayersExtrasAndShares) {
  // 4 blocks of 20, embeddings 1, head 19: 41 | 59 beats 21 | 79 and 61 | 39.
  auto two = BalanceStages({20, 20, 20, 20}, 1, 19, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->begin, (std::vector<int>{0, 2, 4}));
  EXPECT_NEAR(two->imbalance, 0.18, 1e-12);
  EXPECT_EQ(DescribePartition(*two),
            "stage 0: layers 0-1 + embeddings (cost 41%), stage 1: layers 2-3 + head (59%); expected imbalance 18%");
  auto three = BalanceStages({1, 1, 2}, 0, 0, 3);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(DescribePartition(*three),
            "stage 0: layer 0 (cost 25%), stage 1: layer 1 (25%), stage 2: layer 2 (50%); expected imbalance 50%");
  auto one = BalanceStages({3, 3}, 2, 2, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(DescribePartition(*one), "stage 0: layers 0-1 + embeddings + head (cost 100%); expected imbalance 0%");
}

}  // namespace
}  // namespace lockstep::parallel
