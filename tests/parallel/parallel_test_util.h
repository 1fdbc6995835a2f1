// Helpers for the parallel/ tests: ranks as threads of one ThreadsWorld (the first failure
// rethrown after all joined), a tiny GPT config and token batches, and canonical tensors:
// the whole-model values a rank's local (tensor- or pipeline-parallel) buffer stands for,
// so results of different layouts can be compared element by element.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/nn/llama.h"
#include "lockstep/parallel/stage_model.h"

namespace lockstep::parallel::testing {

void RunRanks(int world_size, const std::function<void(std::shared_ptr<comm::Communicator>)>& fn);

// vocab 64, context 16, 2 layers, 4 heads, width 32, MLP x4.
nn::GptConfig TinyGpt();

struct TokenBatch {
  std::vector<int32_t> tokens, targets;
  int64_t B = 0, T = 0;
  nn::ModelInput input() const;
};
TokenBatch RandomTokens(int64_t B, int64_t T, int64_t vocab, uint64_t seed);

using Canonical = std::map<std::string, std::vector<float>>;

// Adds the global elements `flat` (a buffer laid out like m.params()) holds into `out`,
// creating zero-filled full tensors as needed.
void AddToCanonical(const StageModel& m, const float* flat, Canonical* out);
// Sets m's parameter values from full tensors (every tensor of m must be in c).
void LoadCanonical(const Canonical& c, StageModel& m);
// Random full tensors for every tensor name of the model: U(-0.5, 0.5), LayerNorm weights
// 1 + U(-0.3, 0.3) (the GPT-2 init is nearly linear and would test little).
Canonical RandomCanonical(const nn::GptConfig& c, uint64_t seed);
// The same for a Llama (its RMSNorm weights 1 + U(-0.3, 0.3)).
Canonical RandomCanonical(const nn::LlamaConfig& c, uint64_t seed);

// Full tensors assembled from the ranks of a layout, each element from every rank that holds
// it: replicated elements (tp-replicated tensors, or the same element on several ranks) must
// carry the same bits on all of them.
class RankMerge {
 public:
  // Adds what one rank holds (`flat` laid out like m.params()).
  void Add(const StageModel& m, const float* flat);
  // "" when every element of every tensor came from some rank and the ranks that hold the
  // same element agree bit for bit; else the first problem.
  std::string Problems() const;
  const Canonical& values() const { return values_; }

 private:
  Canonical values_;
  std::map<std::string, std::vector<char>> held_;
  std::string conflict_;
};

// The first element whose bits differ between a and b, or a tensor only one of them has ("" if
// they are the same).
std::string CompareBits(const Canonical& a, const Canonical& b);
// Largest |a - b| / (max |a| + 1e-12) over each tensor, the worst tensor (infinity when the
// two do not hold the same tensors of the same sizes).
double MaxRelativeDifference(const Canonical& a, const Canonical& b);

}  // namespace lockstep::parallel::testing
