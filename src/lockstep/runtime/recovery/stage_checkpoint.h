// Checkpoints of a StageModel under any layout: each rank writes the canonical pieces it is
// the writer of (parallel/canonical.h) as its shard, and reads back the elements its local
// tensors cover from whatever shards hold them, so a checkpoint written by one layout
// (dp, ZeRO, tp, pp, any mix) resumes in any other.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lockstep/parallel/canonical.h"
#include "lockstep/runtime/recovery/checkpointing.h"

namespace lockstep::runtime {

// What one rank writes: parameter values of `param_range` (a local flat range; values laid
// out like m.params() starting at flat element params_begin) and its optimizer buffers
// (each covering its own range). tp_rank drops tensor-parallel replicated tensors on tp
// ranks other than 0.
struct StagePieces {
  std::vector<parallel::LocalPiece> pieces;  // names prefixed "model." / "optim.<kind>."
};
StagePieces CollectStagePieces(const parallel::StageModel& m, const float* params, int64_t params_begin,
                               optim::FlatRange param_range, const std::vector<OptimizerStateBuffer>& optimizer,
                               int tp_rank);

// Every rank calls it (shard.world = world size); rank 0 commits.
Status SaveStageCheckpoint(const std::string& root, int keep, const StagePieces& mine, const CheckpointContents& c,
                           const std::function<void()>& before_commit, const ShardWriteContext& shard);

// Reads parameters (into `params`, laid out like m.params() from flat element params_begin,
// covering param_range; nullptr to skip) and each optimizer buffer's range, verifying every
// checksum read; refuses a checkpoint of another configuration.
Result<CheckpointContents> LoadStageState(const std::string& dir, const std::string& expected_hash,
                                          const parallel::StageModel& m, float* params, int64_t params_begin,
                                          optim::FlatRange param_range,
                                          const std::vector<OptimizerStateBuffer>& optimizer);

}  // namespace lockstep::runtime
