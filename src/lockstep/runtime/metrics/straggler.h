// Stragglers and uneven pipeline stages, from the per-rank step times every rank shares after
// each step (step_stats.h). Pure bookkeeping: the Trainer feeds it numbers, and writes the
// warnings and metrics rows it returns.
//
// A straggler is a rank whose compute time stays above `ratio` x the median of its peers' (the
// ranks doing the same work: the same pipeline stage) over the last `steps` steps. One slow
// worker makes every other wait at the next collective, so its own compute time, not its step
// time, is what sets it apart: the others' step times grow by their wait. "Stays above" is
// measured as the median, over the window, of the rank's per-step ratio to its peers' median:
// a worker that the operating system delays in a few steps (many ranks sharing few cores) is
// not named, and a worker slow in most steps does not escape by one fast step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::runtime {

struct Straggler {
  int rank = 0;
  double ratio = 0;       // median over the window of its compute time / its peers' median
  double compute_ms = 0;  // its mean compute time per step over the window
  double median_ms = 0;   // its peers' mean over the window of their per-step median
};

class StragglerDetector {
 public:
  StragglerDetector(double ratio, int64_t steps) : ratio_(ratio), steps_(steps) {}

  // One step: every rank's compute time and peer group, in rank order. Returns the ranks that
  // became stragglers in this step: a full window above the ratio, and not named already (a
  // rank is named again only after its window came back to the ratio or below). A group of
  // fewer than two ranks has no median to compare with.
  std::vector<Straggler> Observe(const std::vector<double>& compute_ms, const std::vector<int>& peer_group);

 private:
  double ratio_;
  int64_t steps_;
  // Per rank, the last `steps` steps (rings): its ratio to its peers' median, its compute time,
  // and that median.
  std::vector<std::vector<double>> ratios_, compute_, median_;
  int64_t observed_ = 0;
  std::vector<bool> named_;
};

// Median of v (the mean of the middle two for an even count); 0 for an empty v.
double Median(std::vector<double> v);

// Pipeline stages: measured busy time per stage against the partitioner's cost estimate.
struct StageBalance {
  std::vector<double> measured_share;   // per stage: its share of all stages' busy time
  std::vector<double> estimated_share;  // per stage: its share of the partitioner's cost
  double measured_imbalance = 0;        // max/mean - 1 of the measured busy times
  int worst_stage = 0;                  // the stage whose measured share is furthest from the estimate
  double worst_error = 0;               // |measured share / estimated share - 1| of that stage
};

// Sums each stage's busy time over steps (the ranks of one stage are averaged).
class StageBalanceMeter {
 public:
  void Add(const std::vector<double>& busy_ms, const std::vector<int>& stage_of_rank);
  int64_t steps() const { return steps_; }
  StageBalance Compare(const std::vector<double>& estimated_cost) const;

 private:
  std::vector<double> busy_ms_;  // per stage, summed over steps
  int64_t steps_ = 0;
};

}  // namespace lockstep::runtime
