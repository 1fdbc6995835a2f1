#include "lockstep/runtime/checkpointing.h"

#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/writer.h"

namespace lockstep::runtime {

Status SaveCheckpoint(const std::string& root, int keep, const nn::ParameterStore& params,
                      const std::vector<OptimizerStateBuffer>& optimizer, const CheckpointContents& c) {
  std::vector<checkpoint::ShardRef> pieces;
  for (const nn::ParamInfo& p : params) {
    checkpoint::ShardRef ref;
    ref.global_shape = p.shape;
    ref.dtype = checkpoint::DType::kF32;
    ref.begin = 0;
    ref.end = p.numel;
    ref.name = "model." + p.name;
    ref.data = params.flat_params() + p.offset;
    pieces.push_back(ref);
    for (const OptimizerStateBuffer& buf : optimizer) {
      ref.name = "optim." + buf.kind + "." + p.name;
      ref.data = buf.values.data() + p.offset;
      pieces.push_back(ref);
    }
  }
  checkpoint::WriterOptions options;
  options.keep = keep;
  LS_ASSIGN_OR_RETURN(checkpoint::CheckpointWriter writer,
                      checkpoint::CheckpointWriter::Begin(root, c.step, 0, 1, options));
  LS_RETURN_IF_ERROR(writer.WriteShard(pieces));
  nlohmann::json extra = {{"config_hash", c.config_hash},
                          {"layout", c.layout},
                          {"loader", data::LoaderStateToJson(c.loader)},
                          {"optimizer_step", c.optimizer_step}};
  return writer.Commit(extra);
}

Result<nlohmann::json> LoadParameters(const std::string& dir, nn::ParameterStore* params) {
  LS_ASSIGN_OR_RETURN(checkpoint::Checkpoint ckpt, checkpoint::Checkpoint::Open(dir));
  for (const nn::ParamInfo& p : *params) {
    std::string name = "model." + p.name;
    const checkpoint::TensorInfo* info = ckpt.Find(name);
    if (info == nullptr) return Status::InvalidArgument(dir + ": checkpoint has no tensor '" + name + "' (a different model?)");
    if (info->shape != p.shape)
      return Status::InvalidArgument(dir + ": tensor '" + name + "' has a different shape than the model's");
    LS_RETURN_IF_ERROR(ckpt.Read(name, 0, p.numel, params->flat_params() + p.offset));
  }
  nlohmann::json extra = ckpt.extra();
  extra["step"] = ckpt.step();
  return extra;
}

}  // namespace lockstep::runtime
