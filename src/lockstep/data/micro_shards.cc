#include "lockstep/data/micro_shards.h"

#include <string>

namespace lockstep::data {
namespace {
bool IsPowerOfTwo(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }
}  // namespace

std::span<const int64_t> ShardIndices(std::span<const int64_t> global_batch, int64_t num_shards, int64_t shard) {
  const size_t size = global_batch.size() / static_cast<size_t>(num_shards);
  return global_batch.subspan(static_cast<size_t>(shard) * size, size);
}

Result<MicroShardLayout> MicroShardLayout::Create(int64_t g, int64_t v, int64_t n) {
  if (!IsPowerOfTwo(v)) {
    return Status::InvalidArgument("the number of micro-shards must be a power of two, got " + std::to_string(v));
  }
  if (g < 1 || g % v != 0) {
    return Status::InvalidArgument("train.batch_size " + std::to_string(g) + " is not divisible into " +
                                   std::to_string(v) + " micro-shards");
  }
  if (n < 1 || v % n != 0) {
    return Status::InvalidArgument("world size " + std::to_string(n) + " does not divide the " + std::to_string(v) +
                                   " micro-shards of the deterministic mode (use 1, 2, 4, ... up to " +
                                   std::to_string(v) + " workers)");
  }
  return MicroShardLayout(g, v, n);
}

}  // namespace lockstep::data
