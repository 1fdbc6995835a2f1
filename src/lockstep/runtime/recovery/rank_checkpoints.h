// RankCheckpoints: one rank's checkpoint I/O under any layout. Every layout saves the same way:
// each rank writes the canonical pieces it is the writer of (parallel/canonical.h) —
// parameters from dp rank 0 of each stage and tp rank, optimizer state from each ZeRO shard
// owner. Replicated data-parallel state is the one-writer case: rank 0 holds every piece and
// writes alone. With several writers the ranks agree that every shard is on disk before rank 0
// commits; with checkpoint.async that agreement runs on each rank's writer thread over a
// communicator of its own, so the training threads only wait for the snapshot copy. Loading
// reads, on every rank, what its local tensors and optimizer range cover, from whatever shards
// of whatever layout hold them, verifying each checksum it touches.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/result.h"
#include "lockstep/optim/flat_update.h"
#include "lockstep/parallel/mesh.h"
#include "lockstep/parallel/stage_model.h"
#include "lockstep/runtime/recovery/async_checkpoint.h"
#include "lockstep/runtime/recovery/checkpointing.h"
#include "lockstep/runtime/setup/run_setup.h"

namespace lockstep::runtime {

// Parameter values of this rank: data[0] is local flat element `begin`; `range` is the local
// flat range meant (all of what the rank holds, or the part it writes).
struct ParamSpan {
  float* data = nullptr;
  int64_t begin = 0;
  optim::FlatRange range;
};

class RankCheckpoints {
 public:
  // `sharded`: the model states are split over ranks (ZeRO, tp, pp), so several ranks write;
  // otherwise rank 0 holds and writes everything.
  RankCheckpoints(const RunSetup& setup, std::shared_ptr<comm::Communicator> world, parallel::MeshCoord coord,
                  bool sharded);

  // Collective (every rank, once before the first save): the communicator asynchronous
  // sharded saves agree over.
  Status Connect();

  // Reads setup.resume_dir into `held` and the optimizer's buffers; the caller restores the
  // rest of the contents (step, optimizer step, data position).
  Result<CheckpointContents> Load(const parallel::StageModel& model, const ParamSpan& held,
                                  const std::vector<OptimizerStateBuffer>& optimizer);

  // This rank's part of the checkpoint of contents.step (collective): `written` and
  // `optimizer` as the rank holds them (the dp replicas beyond rank 0 write neither their
  // parameters nor, without ZeRO, their optimizer state). Saves that committed meanwhile
  // (asynchronous: earlier ones) are added to `finished`.
  Status Save(const parallel::StageModel& model, const ParamSpan& written, std::vector<OptimizerStateBuffer> optimizer,
              const CheckpointContents& contents, std::vector<SaveReport>* finished);

  // A save that committed since the last call (wait: the one in flight, waited for), or none.
  std::optional<Result<SaveReport>> Finished(bool wait);

  // Before the parameters change: an asynchronous save may still be copying them.
  void WaitForSnapshot() {
    if (saver_) saver_->WaitForSnapshot();
  }

 private:
  AsyncCheckpointSaver& Saver();

  const RunSetup& setup_;
  std::shared_ptr<comm::Communicator> world_;
  const parallel::MeshCoord coord_;
  const bool sharded_;
  const int zero_;
  std::unique_ptr<AsyncCheckpointSaver> saver_;  // rank 0 (replicated states) or every rank (sharded)
  std::shared_ptr<comm::Communicator> agree_;    // sharded async saves: driven by the writer threads only
};

}  // namespace lockstep::runtime
