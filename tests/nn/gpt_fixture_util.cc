#include "nn/gpt_fixture.h"

#include <string>

#include "lockstep/core/rng.h"
#include "nn/grad_check.h"

namespace lockstep::nn::testing {

GptConfig SmallConfig() {
  GptConfig c;
  c.vocab = 256;
  c.context = 8;
  c.layers = 2;
  c.heads = 2;
  c.width = 16;
  c.mlp_ratio = 4;
  c.init_seed = 3;
  return c;
}

Batch RandomBatch(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  Batch b{{}, {}, B, T};
  Rng rng(seed, 1);
  for (int64_t i = 0; i < B * T; ++i) {
    b.tokens.push_back(static_cast<int32_t>(rng.Below(vocab)));
    b.targets.push_back(static_cast<int32_t>(rng.Below(vocab)));
  }
  return b;
}

void Randomize(ParameterStore& ps, uint64_t seed) {
  for (const ParamInfo& p : ps) {
    std::vector<float> v = RandomVector(p.numel, 1.0f, seed + p.offset);
    const bool is_ln = p.name.find("ln") != std::string::npos;
    const bool is_bias = p.name.size() > 5 && p.name.substr(p.name.size() - 5) == ".bias";
    for (int64_t j = 0; j < p.numel; ++j) {
      float x = v[j];
      ps.flat_params()[p.offset + j] = is_ln && !is_bias ? 1.0f + 0.3f * x : is_bias ? 0.2f * x : 0.5f * x;
    }
  }
}

}  // namespace lockstep::nn::testing
