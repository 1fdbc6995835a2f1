// Canonical micro-shards for the deterministic data-parallel mode.
//
// A global batch of G indices is cut into V contiguous micro-shards of G/V samples, V a power
// of two fixed by the run, not by the world size. Each shard's gradient is computed the same
// way on whichever worker holds it and shard gradients are summed in shard order, so the sum
// cannot depend on N. With N a power of two dividing V, rank r holds shards
// [r*V/N, (r+1)*V/N): exactly the contiguous slice DistributedSampler gives it, so a rank's
// local batch is its shards back to back and needs no extra bookkeeping.
#pragma once

#include <cstdint>
#include <span>

#include "lockstep/core/result.h"

namespace lockstep::data {

// Samples of micro-shard `shard` within `global_batch` (which holds all G indices):
// global_batch[shard*G/V, (shard+1)*G/V). Requires G % V == 0 and 0 <= shard < V.
std::span<const int64_t> ShardIndices(std::span<const int64_t> global_batch, int64_t num_shards, int64_t shard);

class MicroShardLayout {
 public:
  // Errors: V not a power of two, G not divisible by V, or N not dividing V (deterministic
  // mode runs on 1, 2, 4, ... up to V workers).
  static Result<MicroShardLayout> Create(int64_t global_batch, int64_t num_shards, int64_t world_size);

  int64_t num_shards() const { return num_shards_; }
  int64_t shard_size() const { return global_batch_ / num_shards_; }
  int64_t shards_per_rank() const { return num_shards_ / world_size_; }
  int64_t first_shard_of(int64_t rank) const { return rank * shards_per_rank(); }

  // Micro-shard `shard` of a full global batch.
  std::span<const int64_t> ShardIndices(std::span<const int64_t> global_batch, int64_t shard) const {
    return data::ShardIndices(global_batch, num_shards_, shard);
  }
  // The k-th shard this rank holds, as a slice of the rank's local batch (G/N indices).
  std::span<const int64_t> LocalShard(std::span<const int64_t> local_batch, int64_t k) const {
    return local_batch.subspan(static_cast<size_t>(k * shard_size()), static_cast<size_t>(shard_size()));
  }

 private:
  MicroShardLayout(int64_t g, int64_t v, int64_t n) : global_batch_(g), num_shards_(v), world_size_(n) {}
  int64_t global_batch_, num_shards_, world_size_;
};

}  // namespace lockstep::data
