// The trainer's side of checkpoints: which tensors a data-parallel run saves (parameters
// and optimizer state, each under its parameter's name, so any layout can find them) and
// which scalars go into the manifest's "extra" (step, loader position, config hash).
//
// Data-parallel state is replicated, so rank 0 alone writes one shard holding every tensor
// whole; sharded layouts (ZeRO, TP) will write one shard per rank through the same writer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/core/result.h"
#include "lockstep/data/loader_state.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::runtime {

// One named flat optimizer-state buffer laid out like the parameters (AdamW m, v; SGD momentum).
struct OptimizerStateBuffer {
  std::string kind;          // "exp_avg", "exp_avg_sq", "momentum"
  std::span<float> values;   // params.numel() floats
};

struct CheckpointContents {
  int64_t step = 0;               // optimizer steps completed
  int64_t optimizer_step = 0;     // the optimizer's own counter (AdamW bias correction)
  data::LoaderState loader;
  std::string config_hash;        // 16 hex digits
  nlohmann::json layout;          // {"world": N, "dp": N, "tp": 1, "pp": 1, "zero": 0}
};

// Writes <root>/step-XXXXXXXX and moves `latest` to it (rank 0 only).
Status SaveCheckpoint(const std::string& root, int keep, const nn::ParameterStore& params,
                      const std::vector<OptimizerStateBuffer>& optimizer, const CheckpointContents& contents);

// Loads parameter values by name from a checkpoint directory into `params` (shapes must
// match), verifying the checksum of everything read. Returns the manifest's extra().
Result<nlohmann::json> LoadParameters(const std::string& dir, nn::ParameterStore* params);

}  // namespace lockstep::runtime
