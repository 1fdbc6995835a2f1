#include "lockstep/runtime/metrics/straggler.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace lockstep::runtime {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

std::vector<Straggler> StragglerDetector::Observe(const std::vector<double>& compute_ms,
                                                  const std::vector<int>& peer_group) {
  const size_t n = compute_ms.size();
  const size_t steps = static_cast<size_t>(steps_), slot = static_cast<size_t>(observed_ % steps_);
  for (auto* ring : {&ratios_, &compute_, &median_}) ring->resize(n, std::vector<double>(steps, 0.0));
  named_.resize(n, false);
  std::map<int, std::vector<double>> groups;
  for (size_t r = 0; r < n; ++r) groups[peer_group[r]].push_back(compute_ms[r]);
  std::map<int, double> median;
  for (const auto& [g, times] : groups) median[g] = times.size() >= 2 ? Median(times) : 0.0;
  for (size_t r = 0; r < n; ++r) {
    const double m = median[peer_group[r]];
    ratios_[r][slot] = m > 0 ? compute_ms[r] / m : 0.0;
    compute_[r][slot] = compute_ms[r];
    median_[r][slot] = m;
  }
  if (++observed_ < steps_) return {};
  std::vector<Straggler> named;
  for (size_t r = 0; r < n; ++r) {
    const double ratio = Median(ratios_[r]);
    if (!(ratio > ratio_)) {
      named_[r] = false;
      continue;
    }
    if (named_[r]) continue;
    named_[r] = true;
    double compute = 0, peers = 0;
    for (size_t i = 0; i < steps; ++i) {
      compute += compute_[r][i];
      peers += median_[r][i];
    }
    named.push_back(
        {static_cast<int>(r), ratio, compute / static_cast<double>(steps), peers / static_cast<double>(steps)});
  }
  return named;
}

void StageBalanceMeter::Add(const std::vector<double>& busy_ms, const std::vector<int>& stage_of_rank) {
  int stages = 0;
  for (int s : stage_of_rank) stages = std::max(stages, s + 1);
  busy_ms_.resize(static_cast<size_t>(stages), 0.0);
  std::vector<double> sum(static_cast<size_t>(stages), 0.0);
  std::vector<int> count(static_cast<size_t>(stages), 0);
  for (size_t r = 0; r < busy_ms.size() && r < stage_of_rank.size(); ++r) {
    sum[static_cast<size_t>(stage_of_rank[r])] += busy_ms[r];
    ++count[static_cast<size_t>(stage_of_rank[r])];
  }
  for (size_t s = 0; s < sum.size(); ++s)
    if (count[s] > 0) busy_ms_[s] += sum[s] / count[s];
  ++steps_;
}

StageBalance StageBalanceMeter::Compare(const std::vector<double>& estimated_cost) const {
  StageBalance b;
  const size_t stages = std::min(busy_ms_.size(), estimated_cost.size());
  double measured = 0, estimated = 0, largest = 0;
  for (size_t s = 0; s < stages; ++s) {
    measured += busy_ms_[s];
    estimated += estimated_cost[s];
    largest = std::max(largest, busy_ms_[s]);
  }
  if (stages == 0 || measured <= 0 || estimated <= 0) return b;
  b.measured_imbalance = largest / (measured / static_cast<double>(stages)) - 1;
  for (size_t s = 0; s < stages; ++s) {
    b.measured_share.push_back(busy_ms_[s] / measured);
    b.estimated_share.push_back(estimated_cost[s] / estimated);
    const double error = std::fabs(b.measured_share[s] / b.estimated_share[s] - 1);
    if (error > b.worst_error) {
      b.worst_error = error;
      b.worst_stage = static_cast<int>(s);
    }
  }
  return b;
}

}  // namespace lockstep::runtime
