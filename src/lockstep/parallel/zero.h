// ZeRO stage 1: optimizer state sharded over the data-parallel ranks.
//
// The flat parameter buffer of numel elements is cut into dp contiguous shards of
// ceil(numel / dp) elements (the last one shorter, possibly empty). Rank r holds optimizer
// state only for shard r; after the (full) gradient allreduce it updates only those
// parameters, then an all-gather gives every rank the whole updated buffer. AdamW and SGD
// update each element from that element alone, so the weights are bit-identical to the
// replicated (zero=0) run: only where the arithmetic happens changes, not what it is.
//
// Memory per rank (fp32 Adam, Ψ parameters): parameters 4Ψ + gradients 4Ψ + moments 8Ψ/dp,
// the ZeRO paper's stage-1 accounting.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/result.h"
#include "lockstep/optim/param_groups.h"

namespace lockstep::parallel {

// Shard `rank` of [0, numel) over `world` ranks: [rank*c, min((rank+1)*c, numel)),
// c = ceil(numel / world).
optim::FlatRange ShardRange(int64_t numel, int rank, int world);

// The per-rank bytes the ZeRO paper predicts for fp32 Adam (Ψ = numel, N = dp ranks).
struct ZeroBytes {
  int64_t params = 0, grads = 0, optimizer = 0;
  int64_t total() const { return params + grads + optimizer; }
};
ZeroBytes ExpectedZeroBytes(int64_t numel, int dp, int stage);

// After each rank updated its shard of `params` (numel floats, the same buffer layout on
// every rank), makes every rank's buffer whole: one all-gather over `dp`.
class ShardedParamGather {
 public:
  ShardedParamGather(std::shared_ptr<comm::Communicator> dp, int64_t numel);
  Status Gather(float* params);

 private:
  std::shared_ptr<comm::Communicator> dp_;
  int64_t numel_, chunk_;
  std::vector<float> staging_;  // dp * chunk floats: the all-gather needs equal blocks
};

}  // namespace lockstep::parallel
