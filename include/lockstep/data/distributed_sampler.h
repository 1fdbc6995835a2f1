// DistributedSampler: which dataset indices each rank trains on, batch by batch.
//
// Epoch e is a permutation of [0, S) made by Fisher-Yates with Rng(seed, stream = e) (counter-
// based, so any rank computes any epoch's permutation without communication). Global batch b
// of epoch e is perm[b*G, (b+1)*G); rank r of N gets the contiguous slice
// [r*G/N, (r+1)*G/N) of it. The sequence of global batches therefore never depends on N —
// only how each batch is divided — which is what lets results match across world sizes.
//
// A final partial batch (S % G != 0) is handled explicitly, never by giving ranks unequal
// work (one rank waiting forever on a collective):
//   kDrop  (default) the last S % G samples of the permutation are skipped this epoch;
//   kPad   the batch is filled up by continuing from the start of the permutation;
//   kMask  the batch is filled with index -1 ("no sample"): evaluation uses this so every
//          sample counts exactly once; loaders turn -1 into an ignored target.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/data/loader_state.h"

namespace lockstep::data {

enum class FinalBatch { kDrop, kPad, kMask };

// Parses "drop" / "pad" (the values of data.final_batch); `key` names the config key.
Result<FinalBatch> ParseFinalBatch(const std::string& text, const std::string& key);

struct SamplerOptions {
  int64_t dataset_size = 0;  // S
  int64_t global_batch = 0;  // G: all ranks together
  int64_t world_size = 1;    // N
  int64_t rank = 0;          // r
  uint64_t seed = 0;
  bool shuffle = true;  // false: the identity permutation (evaluation)
  FinalBatch final_batch = FinalBatch::kDrop;
  // The config key G came from, for error messages ("train.batch_size", "eval.batch_size").
  std::string batch_key = "train.batch_size";
};

// The error for G % N != 0, with the two nearest batch sizes that would work.
Status BatchNotDivisibleError(const std::string& batch_key, int64_t global_batch, int64_t world_size);

class DistributedSampler {
 public:
  static Result<DistributedSampler> Create(const SamplerOptions& options);

  // Global batches per epoch: floor(S/G) with kDrop, ceil(S/G) otherwise.
  int64_t BatchesPerEpoch() const { return batches_per_epoch_; }
  int64_t LocalBatchSize() const { return options_.global_batch / options_.world_size; }
  const SamplerOptions& options() const { return options_; }

  // All G indices of global batch `batch` of `epoch` (every rank can compute every batch:
  // the deterministic mode needs the canonical global batch). -1 marks a masked slot.
  void GlobalBatch(int64_t epoch, int64_t batch, std::vector<int64_t>* out);
  // This rank's slice of it.
  void LocalBatch(int64_t epoch, int64_t batch, std::vector<int64_t>* out);

  // Iterator form: this rank's indices of the next global batch; the position then moves on
  // (to the next epoch after the last batch of one).
  void Next(std::vector<int64_t>* local_indices);

  LoaderState State() const { return state_; }
  // Continues from a saved position (the state's seed replaces the sampler's). Fails if the
  // position is past the end of an epoch.
  Status Restore(const LoaderState& state);

  // The permutation of `epoch` (cached: computing it costs S RNG draws).
  std::span<const int64_t> Permutation(int64_t epoch);

 private:
  explicit DistributedSampler(const SamplerOptions& options);

  SamplerOptions options_;
  int64_t batches_per_epoch_ = 0;
  LoaderState state_;
  int64_t cached_epoch_ = -1;
  uint64_t cached_seed_ = 0;
  std::vector<int64_t> perm_;
  std::vector<int64_t> scratch_;
};

}  // namespace lockstep::data
