// The trainer's side of checkpoints: which tensors a run saves (parameters and optimizer
// state, each under its parameter's name, so any layout can find them) and which scalars go
// into the manifest's "extra" (step, loader position, config hash). Every layout writes
// through SaveShardRefs: replicated data-parallel state is the one-writer case (rank 0 writes
// one shard holding every tensor whole), sharded layouts (ZeRO, tp, pp) one shard per rank.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/writer.h"
#include "lockstep/core/config.h"
#include "lockstep/core/result.h"
#include "lockstep/data/loader_state.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::runtime {

// One named flat optimizer-state buffer laid out like the parameters (AdamW m, v; SGD
// momentum), or a contiguous range of it (a ZeRO shard): values[i] belongs to flat element
// begin + i.
struct OptimizerStateBuffer {
  std::string kind;         // "exp_avg", "exp_avg_sq", "momentum"
  std::span<float> values;  // params.numel() floats, or the shard's
  int64_t begin = 0;
};

// Which part of a checkpoint this rank writes. world 1: everything. With world > 1 (ZeRO)
// every rank calls the save: rank 0 writes the parameters, each rank its optimizer shard,
// then all_ok (a collective: true when every rank's write succeeded) decides whether rank 0
// commits.
struct ShardWriteContext {
  int rank = 0;
  int world = 1;
  std::function<bool(bool ok)> all_ok;
};

struct CheckpointContents {
  int64_t step = 0;            // optimizer steps completed
  int64_t optimizer_step = 0;  // the optimizer's own counter (AdamW bias correction)
  data::LoaderState loader;
  std::string config_hash;  // 16 hex digits
  nlohmann::json layout;    // {"world": N, "dp": N, "tp": 1, "pp": 1, "zero": 0}
  nlohmann::json rng;       // {"kind": "philox4x32-10", "seed": S}: every stream derives from it
  // The model's description (interop/gpt_weights.h: {"kind":"gpt", "vocab", ...}), so that
  // export and sample need nothing but the checkpoint; null: not written.
  nlohmann::json model;
  // The run's tokenizer.json (data.tokenizer), kept whole; null: none.
  std::shared_ptr<const nlohmann::json> tokenizer;
};

// The config hash a checkpoint carries: every key that shapes the training trajectory (model,
// data, optimizer, batch, seed), but not thread counts, step counts, logging, evaluation,
// checkpoint settings or data.dir, so a run resumed on another machine or extended with
// --steps is still "the same run", while a checkpoint of another model or recipe is foreign.
std::string TrajectoryHash(const Config& config);

// Writes this rank's pieces (names already "model.<param>" / "optim.<kind>.<param>") into
// <root>/step-XXXXXXXX; with shard.world > 1 every rank calls it and rank 0 commits once all
// agree (ShardWriteContext). The pieces of all ranks must tile every tensor.
Status SaveShardRefs(const std::string& root, int keep, const std::vector<checkpoint::ShardRef>& pieces,
                     const CheckpointContents& contents, const std::function<void()>& before_commit,
                     const ShardWriteContext& shard);

// The manifest's step, optimizer step, loader position, layout and rng of an open checkpoint
// (the caller checked its config hash, which is copied in).
Result<CheckpointContents> ReadContents(const checkpoint::Checkpoint& ckpt, const std::string& expected_hash);

// Loads parameter values by name from a checkpoint directory into `params` (shapes must
// match), verifying the checksum of everything read. Returns the manifest's extra().
Result<nlohmann::json> LoadParameters(const std::string& dir, nn::ParameterStore* params);

}  // namespace lockstep::runtime
