#include "lockstep/runtime/recovery/stage_checkpoint.h"

#include <algorithm>

#include "lockstep/checkpoint/reader.h"

namespace lockstep::runtime {
namespace {

void Append(std::vector<parallel::LocalPiece>* out, std::vector<parallel::LocalPiece> pieces,
            const std::string& prefix) {
  for (parallel::LocalPiece& p : pieces) {
    p.name = prefix + p.name;
    out->push_back(std::move(p));
  }
}

// Reads the elements of `range` of every tensor (as prefix + name) into values (laid out like
// m.params(), starting at flat element values_begin).
Status ReadRange(const checkpoint::Checkpoint& ckpt, const std::string& prefix, const parallel::StageModel& m,
                 float* values, int64_t values_begin, optim::FlatRange range) {
  // tp_rank 0: a reader needs replicated tensors too.
  for (const parallel::LocalPiece& p : parallel::PiecesOf(m, values, values_begin, range, 0, /*reading=*/true)) {
    const std::string name = prefix + p.name;
    const checkpoint::TensorInfo* info = ckpt.Find(name);
    if (info == nullptr)
      return Status::InvalidArgument(ckpt.dir() + ": checkpoint has no tensor '" + name +
                                     "' (a different model or optimizer?)");
    if (info->shape != p.global_shape)
      return Status::InvalidArgument(ckpt.dir() + ": tensor '" + name + "' has a different shape than the model's");
    LS_RETURN_IF_ERROR(ckpt.Read(name, p.global_begin, p.global_begin + p.count, const_cast<float*>(p.data)));
  }
  return Status::Ok();
}

}  // namespace

StagePieces CollectStagePieces(const parallel::StageModel& m, const float* params, int64_t params_begin,
                               optim::FlatRange param_range, const std::vector<OptimizerStateBuffer>& optimizer,
                               int tp_rank) {
  StagePieces s;
  if (params != nullptr && param_range.size() > 0)
    Append(&s.pieces, parallel::PiecesOf(m, params, params_begin, param_range, tp_rank), "model.");
  for (const OptimizerStateBuffer& buf : optimizer) {
    const optim::FlatRange r{buf.begin, buf.begin + static_cast<int64_t>(buf.values.size())};
    Append(&s.pieces, parallel::PiecesOf(m, buf.values.data(), buf.begin, r, tp_rank), "optim." + buf.kind + ".");
  }
  return s;
}

Status SaveStageCheckpoint(const std::string& root, int keep, const StagePieces& mine, const CheckpointContents& c,
                           const std::function<void()>& before_commit, const ShardWriteContext& shard) {
  std::vector<checkpoint::ShardRef> refs;
  refs.reserve(mine.pieces.size());
  for (const parallel::LocalPiece& p : mine.pieces) {
    checkpoint::ShardRef ref;
    ref.name = p.name;
    ref.global_shape = p.global_shape;
    ref.dtype = checkpoint::DType::kF32;
    ref.data = p.data;
    ref.begin = p.global_begin;
    ref.end = p.global_begin + p.count;
    refs.push_back(std::move(ref));
  }
  return SaveShardRefs(root, keep, refs, c, before_commit, shard);
}

Result<CheckpointContents> LoadStageState(const std::string& dir, const std::string& expected_hash,
                                          const parallel::StageModel& m, float* params, int64_t params_begin,
                                          optim::FlatRange param_range,
                                          const std::vector<OptimizerStateBuffer>& optimizer) {
  LS_ASSIGN_OR_RETURN(checkpoint::Checkpoint ckpt, checkpoint::Checkpoint::Open(dir));
  LS_RETURN_IF_ERROR(ckpt.CheckConfigHash(expected_hash));
  if (params != nullptr) LS_RETURN_IF_ERROR(ReadRange(ckpt, "model.", m, params, params_begin, param_range));
  for (const OptimizerStateBuffer& buf : optimizer) {
    const optim::FlatRange r{buf.begin, buf.begin + static_cast<int64_t>(buf.values.size())};
    LS_RETURN_IF_ERROR(ReadRange(ckpt, "optim." + buf.kind + ".", m, buf.values.data(), buf.begin, r));
  }
  return ReadContents(ckpt, expected_hash);
}

}  // namespace lockstep::runtime
