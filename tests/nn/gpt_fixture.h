// Small GPT fixtures shared by the nn GPT tests: a 2-layer width-16 config, random token
// batches, and large random parameters that exercise the nonlinearities.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/nn/gpt.h"

namespace lockstep::nn::testing {

GptConfig SmallConfig();

struct Batch {
  std::vector<int32_t> tokens, targets;
  int64_t B, T;
  ModelInput input() const {
    ModelInput in;
    in.tokens = tokens.data();
    in.targets = targets.data();
    in.batch = B;
    in.seq = T;
    return in;
  }
};

Batch RandomBatch(int64_t B, int64_t T, int64_t vocab, uint64_t seed);

// Large random parameters (the GPT-2 init is nearly linear and would test little):
// matrices and embeddings U(-0.5, 0.5), LayerNorm weights 1 + U(-0.3, 0.3), biases
// U(-0.2, 0.2).
void Randomize(ParameterStore& ps, uint64_t seed);

}  // namespace lockstep::nn::testing
