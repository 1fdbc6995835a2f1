#include "lockstep/data/distributed_sampler.h"

#include <numeric>
#include <utility>

#include "lockstep/core/rng.h"

namespace lockstep::data {

Result<FinalBatch> ParseFinalBatch(const std::string& text, const std::string& key) {
  if (text == "drop") return FinalBatch::kDrop;
  if (text == "pad") return FinalBatch::kPad;
  return Status::InvalidArgument(key + ": expected \"drop\" or \"pad\", got \"" + text + "\"");
}

Status BatchNotDivisibleError(const std::string& batch_key, int64_t g, int64_t n) {
  int64_t below = (g / n) * n;
  int64_t above = below + n;
  std::string hint = below > 0 ? std::to_string(below) + " or " + std::to_string(above) : std::to_string(above);
  return Status::InvalidArgument(batch_key + " " + std::to_string(g) + " is not divisible by the world size " +
                                 std::to_string(n) + " (try " + hint + ")");
}

Result<DistributedSampler> DistributedSampler::Create(const SamplerOptions& o) {
  if (o.world_size < 1) {
    return Status::InvalidArgument("world size must be >= 1, got " + std::to_string(o.world_size));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return Status::InvalidArgument("rank " + std::to_string(o.rank) + " is outside the world of " +
                                   std::to_string(o.world_size));
  }
  if (o.global_batch < 1) {
    return Status::InvalidArgument(o.batch_key + ": expected an integer >= 1, got " + std::to_string(o.global_batch));
  }
  if (o.global_batch % o.world_size != 0) return BatchNotDivisibleError(o.batch_key, o.global_batch, o.world_size);
  if (o.dataset_size < 1) return Status::InvalidArgument("the dataset has no samples");
  if (o.final_batch == FinalBatch::kDrop && o.dataset_size < o.global_batch) {
    return Status::InvalidArgument(o.batch_key + " " + std::to_string(o.global_batch) +
                                   " is larger than the dataset (" + std::to_string(o.dataset_size) +
                                   " samples), so dropping the partial batch leaves none (use data.final_batch = "
                                   "\"pad\" or a smaller batch)");
  }
  return DistributedSampler(o);
}

DistributedSampler::DistributedSampler(const SamplerOptions& o) : options_(o) {
  const int64_t s = o.dataset_size, g = o.global_batch;
  batches_per_epoch_ = o.final_batch == FinalBatch::kDrop ? s / g : (s + g - 1) / g;
  state_.seed = o.seed;
}

std::span<const int64_t> DistributedSampler::Permutation(int64_t epoch) {
  if (epoch == cached_epoch_ && state_.seed == cached_seed_) return perm_;
  perm_.resize(static_cast<size_t>(options_.dataset_size));
  std::iota(perm_.begin(), perm_.end(), int64_t{0});
  if (options_.shuffle) {
    // Fisher-Yates from the back; Below() is unbiased, so every permutation is equally likely.
    Rng rng(state_.seed, static_cast<uint64_t>(epoch));
    for (int64_t i = options_.dataset_size - 1; i > 0; --i) {
      int64_t j = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(i + 1)));
      std::swap(perm_[static_cast<size_t>(i)], perm_[static_cast<size_t>(j)]);
    }
  }
  cached_epoch_ = epoch;
  cached_seed_ = state_.seed;
  return perm_;
}

void DistributedSampler::GlobalBatch(int64_t epoch, int64_t batch, std::vector<int64_t>* out) {
  std::span<const int64_t> perm = Permutation(epoch);
  const int64_t s = options_.dataset_size, g = options_.global_batch;
  out->resize(static_cast<size_t>(g));
  for (int64_t i = 0; i < g; ++i) {
    int64_t pos = batch * g + i;
    int64_t idx;
    if (pos < s) {
      idx = perm[static_cast<size_t>(pos)];
    } else if (options_.final_batch == FinalBatch::kMask) {
      idx = -1;
    } else {
      idx = perm[static_cast<size_t>(pos % s)];  // kPad: wrap to the start of the permutation
    }
    (*out)[static_cast<size_t>(i)] = idx;
  }
}

void DistributedSampler::LocalBatch(int64_t epoch, int64_t batch, std::vector<int64_t>* out) {
  GlobalBatch(epoch, batch, &scratch_);
  const int64_t local = LocalBatchSize();
  auto first = scratch_.begin() + options_.rank * local;
  out->assign(first, first + local);
}

void DistributedSampler::Next(std::vector<int64_t>* local_indices) {
  LocalBatch(state_.epoch, state_.batch_in_epoch, local_indices);
  if (++state_.batch_in_epoch == batches_per_epoch_) {
    ++state_.epoch;
    state_.batch_in_epoch = 0;
  }
}

Status DistributedSampler::Restore(const LoaderState& state) {
  if (state.epoch < 0 || state.batch_in_epoch < 0 || state.batch_in_epoch >= batches_per_epoch_) {
    return Status::InvalidArgument("loader state (epoch " + std::to_string(state.epoch) + ", batch " +
                                   std::to_string(state.batch_in_epoch) + ") is outside an epoch of " +
                                   std::to_string(batches_per_epoch_) +
                                   " batches: the checkpoint was written "
                                   "with a different dataset or batch size");
  }
  state_ = state;
  return Status::Ok();
}

}  // namespace lockstep::data
