#include "lockstep/runtime/recovery/rank_checkpoints.h"

#include <string>
#include <utility>

#include "lockstep/runtime/recovery/fault_injection.h"
#include "lockstep/runtime/recovery/stage_checkpoint.h"

namespace lockstep::runtime {

RankCheckpoints::RankCheckpoints(const RunSetup& setup, std::shared_ptr<comm::Communicator> world,
                                 parallel::MeshCoord coord, bool sharded)
    : setup_(setup), world_(std::move(world)), coord_(coord), sharded_(sharded), zero_(setup.options.zero) {}

Status RankCheckpoints::Connect() {
  if (setup_.run.checkpoint.async && sharded_) {
    LS_ASSIGN_OR_RETURN(agree_, world_->Split(0, world_->rank()));
  }
  return Status::Ok();
}

AsyncCheckpointSaver& RankCheckpoints::Saver() {
  if (!saver_)
    saver_ = std::make_unique<AsyncCheckpointSaver>(
        setup_.out_dir + "/checkpoints", static_cast<int>(setup_.run.checkpoint.keep), setup_.run.checkpoint.async);
  return *saver_;
}

Result<CheckpointContents> RankCheckpoints::Load(const parallel::StageModel& model, const ParamSpan& held,
                                                 const std::vector<OptimizerStateBuffer>& optimizer) {
  LS_ASSIGN_OR_RETURN(CheckpointContents c, LoadStageState(setup_.resume_dir, TrajectoryHash(setup_.config), model,
                                                           held.data, held.begin, held.range, optimizer));
  if (c.step > setup_.total_steps)
    return Status::InvalidArgument(setup_.resume_dir + " is at step " + std::to_string(c.step) + ", past this run's " +
                                   std::to_string(setup_.total_steps) + " steps (pass a larger --steps)");
  return c;
}

Status RankCheckpoints::Save(const parallel::StageModel& model, const ParamSpan& written,
                             std::vector<OptimizerStateBuffer> optimizer, const CheckpointContents& contents,
                             std::vector<SaveReport>* finished) {
  const int rank = world_->rank();
  const int64_t step = contents.step;
  if (!sharded_ && rank != 0) {
    InjectDuringCheckpoint(setup_.fault, rank, step);
    return Status::Ok();
  }
  ShardWriteContext shard;
  if (sharded_) {
    shard.rank = rank;
    shard.world = world_->size();
    comm::Communicator* agree = setup_.run.checkpoint.async ? agree_.get() : world_.get();
    shard.all_ok = [agree](bool ok) {
      int32_t mine = ok ? 1 : 0, all = 0;
      Status s = agree->Allreduce(&mine, &all, 1, comm::DType::kI32, comm::ReduceOp::kMin)->Wait();
      return s.ok() && all == 1;
    };
  }
  // Replicated: dp rank 0 writes it (DiLoCo replicas differ, and the trainer names their own).
  // (PowerSGD: each rank writes its own error feedback; the trainer leaves its replicated state out.)
  if (zero_ == 0 && coord_.dp != 0 && !setup_.run.train.diloco() && !setup_.run.train.powersgd()) optimizer.clear();
  StagePieces pieces = CollectStagePieces(model, written.data, written.begin, written.range, optimizer, coord_.tp);
  int64_t bytes = 0;
  for (const parallel::LocalPiece& p : pieces.pieces) bytes += p.count * static_cast<int64_t>(sizeof(float));
  if (sharded_)
    LS_RETURN_IF_ERROR(world_->Allreduce(&bytes, &bytes, 1, comm::DType::kI64, comm::ReduceOp::kSum)->Wait());
  const FaultSpec fault = setup_.fault;
  return Saver().SavePieces(
      std::move(pieces.pieces), contents, [fault, rank, step] { InjectDuringCheckpoint(fault, rank, step); }, shard,
      bytes, finished, /*last=*/step == setup_.total_steps);
}

std::optional<Result<SaveReport>> RankCheckpoints::Finished(bool wait) {
  if (!saver_) return std::nullopt;
  return wait ? saver_->Wait() : saver_->Poll();
}

}  // namespace lockstep::runtime
