// TokenSampler: the next token from one row of logits, as `lockstep sample` draws it for any
// language model: argmax at temperature <= 0, else a draw from softmax(logits / temperature)
// over the first `vocab` columns (padding columns are never candidates), restricted to the
// top_k largest when top_k > 0. Draws come from Rng(seed, 0), so a seed gives the same text.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/core/rng.h"

namespace lockstep::nn {

class TokenSampler {
 public:
  TokenSampler(int64_t vocab, float temperature, int top_k, uint64_t seed);
  int32_t Next(const float* row);

 private:
  int64_t vocab_;
  float temperature_;
  int top_k_;
  Rng rng_;
  std::vector<double> probs_;
  std::vector<float> kth_;
};

}  // namespace lockstep::nn
