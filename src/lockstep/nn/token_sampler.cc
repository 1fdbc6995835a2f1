#include "lockstep/nn/token_sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace lockstep::nn {

TokenSampler::TokenSampler(int64_t vocab, float temperature, int top_k, uint64_t seed)
    : vocab_(vocab), temperature_(temperature), top_k_(top_k), rng_(seed, 0), probs_(static_cast<size_t>(vocab)) {}

int32_t TokenSampler::Next(const float* row) {
  const int64_t V = vocab_;
  if (temperature_ <= 0.0f) return static_cast<int32_t>(std::max_element(row, row + V) - row);
  // top-k: logits below the k-th largest are out.
  float floor = -std::numeric_limits<float>::infinity();
  if (top_k_ > 0 && top_k_ < V) {
    kth_.assign(row, row + V);
    std::nth_element(kth_.begin(), kth_.begin() + (top_k_ - 1), kth_.end(), std::greater<float>());
    floor = kth_[static_cast<size_t>(top_k_ - 1)];
  }
  const float mx = *std::max_element(row, row + V);
  double sum = 0.0;
  for (int64_t j = 0; j < V; ++j) {
    probs_[j] = row[j] < floor ? 0.0 : std::exp(static_cast<double>(row[j] - mx) / temperature_);
    sum += probs_[j];
  }
  double u = static_cast<double>(rng_.Uniform()) * sum;
  for (int64_t j = 0; j < V; ++j) {
    u -= probs_[j];
    if (u < 0.0) return static_cast<int32_t>(j);
  }
  return static_cast<int32_t>(V - 1);
}

}  // namespace lockstep::nn
