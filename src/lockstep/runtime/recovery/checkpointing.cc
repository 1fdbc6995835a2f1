#include "lockstep/runtime/recovery/checkpointing.h"

#include <algorithm>

#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/resolve.h"
#include "lockstep/checkpoint/writer.h"
#include "lockstep/core/hash.h"
#include "lockstep/core/log.h"

namespace lockstep::runtime {

Status SaveShardRefs(const std::string& root, int keep, const std::vector<checkpoint::ShardRef>& pieces,
                     const CheckpointContents& c, const std::function<void()>& before_commit,
                     const ShardWriteContext& shard) {
  checkpoint::WriterOptions options;
  options.keep = keep;
  LS_ASSIGN_OR_RETURN(checkpoint::CheckpointWriter writer,
                      checkpoint::CheckpointWriter::Begin(root, c.step, shard.rank, shard.world, options));
  Status written = writer.WriteShard(pieces);
  if (before_commit) before_commit();
  if (shard.world > 1) {
    const bool all = shard.all_ok(written.ok());
    if (!written.ok()) return written;
    if (!all)
      return Status::Aborted("checkpoint of step " + std::to_string(c.step) +
                             ": another rank failed to write its shard");
  }
  LS_RETURN_IF_ERROR(written);
  if (shard.rank != 0) return Status::Ok();
  nlohmann::json extra = {{"config_hash", c.config_hash},
                          {"layout", c.layout},
                          {"loader", data::LoaderStateToJson(c.loader)},
                          {"optimizer_step", c.optimizer_step},
                          {"rng", c.rng}};
  if (!c.model.is_null()) extra["model"] = c.model;
  if (c.tokenizer) extra["tokenizer"] = *c.tokenizer;
  return writer.Commit(extra);
}

std::string TrajectoryHash(const Config& config) {
  return HexU64(config.HashWithout({"train.threads", "train.steps", "train.epochs", "train.log_every",
                                    "train.accum_steps", "train.bucket_bytes", "eval", "checkpoint", "data.dir",
                                    "data.tokenizer"}));
}

namespace {

Result<int64_t> IntField(const nlohmann::json& extra, const char* key, const std::string& dir) {
  auto it = extra.find(key);
  if (it == extra.end() || !it->is_number_integer())
    return Status::Corruption(dir + "/manifest.json: extra." + key + " is missing or not an integer");
  return it->get<int64_t>();
}

Status ReadTensor(const checkpoint::Checkpoint& ckpt, const std::string& name, const nn::ParamInfo& p, int64_t begin,
                  int64_t end, float* out) {
  const checkpoint::TensorInfo* info = ckpt.Find(name);
  if (info == nullptr)
    return Status::InvalidArgument(ckpt.dir() + ": checkpoint has no tensor '" + name +
                                   "' (a different model or optimizer?)");
  if (info->shape != p.shape)
    return Status::InvalidArgument(ckpt.dir() + ": tensor '" + name + "' has a different shape than the model's");
  return ckpt.Read(name, begin, end, out);
}

}  // namespace

Result<CheckpointContents> ReadContents(const checkpoint::Checkpoint& ckpt, const std::string& expected_hash) {
  const std::string& dir = ckpt.dir();
  const nlohmann::json& extra = ckpt.extra();
  CheckpointContents c;
  c.step = ckpt.step();
  LS_ASSIGN_OR_RETURN(c.optimizer_step, IntField(extra, "optimizer_step", dir));
  auto loader = extra.find("loader");
  if (loader == extra.end()) return Status::Corruption(dir + "/manifest.json: extra.loader is missing");
  Result<data::LoaderState> state = data::LoaderStateFromJson(*loader);
  if (!state.ok()) return Status::Corruption(dir + "/manifest.json: extra.loader: " + state.status().message());
  c.loader = *state;
  c.config_hash = expected_hash;
  if (auto it = extra.find("layout"); it != extra.end()) c.layout = *it;
  if (auto it = extra.find("rng"); it != extra.end()) c.rng = *it;
  return c;
}

Result<nlohmann::json> LoadParameters(const std::string& dir, nn::ParameterStore* params) {
  LS_ASSIGN_OR_RETURN(checkpoint::Checkpoint ckpt, checkpoint::Checkpoint::Open(dir));
  for (const nn::ParamInfo& p : *params)
    LS_RETURN_IF_ERROR(ReadTensor(ckpt, "model." + p.name, p, 0, p.numel, params->flat_params() + p.offset));
  nlohmann::json extra = ckpt.extra();
  extra["step"] = ckpt.step();
  return extra;
}

}  // namespace lockstep::runtime
