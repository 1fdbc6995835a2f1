#include "lockstep/interop/gpt_weights.h"

#include <cstring>

#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/resolve.h"
#include "lockstep/core/config.h"
#include "lockstep/nn/model.h"

namespace lockstep::interop {

nlohmann::json GptConfigToJson(const nn::GptConfig& c) {
  return {
      {"kind", "gpt"},           {"vocab", c.vocab},   {"vocab_pad", c.vocab_pad}, {"tie_embeddings", c.tie_embeddings},
      {"context", c.context},    {"layers", c.layers}, {"heads", c.heads},         {"width", c.width},
      {"mlp_ratio", c.mlp_ratio}};
}

Result<nn::GptConfig> GptConfigFromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || j.value("kind", "") != "gpt")
    return Status::InvalidArgument(where + ": the model is not a GPT (model.kind must be \"gpt\")");
  nn::GptConfig c;
  try {
    c.vocab = j.at("vocab").get<int64_t>();
    c.vocab_pad = j.value("vocab_pad", int64_t{1});
    c.tie_embeddings = j.value("tie_embeddings", false);
    c.context = j.at("context").get<int64_t>();
    c.layers = j.at("layers").get<int64_t>();
    c.heads = j.at("heads").get<int64_t>();
    c.width = j.at("width").get<int64_t>();
    c.mlp_ratio = j.at("mlp_ratio").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(where + ": bad model description: " + e.what());
  }
  Status valid = nn::ValidateGptConfig(c);
  if (!valid.ok()) return Status::InvalidArgument(where + ": " + valid.message());
  return c;
}

void CopyInto(const GptWeights& w, nn::Gpt* gpt) {
  for (const nn::ParamInfo& p : gpt->params()) {
    const std::vector<float>& v = w.tensors.at(p.name);
    std::memcpy(gpt->params().flat_params() + p.offset, v.data(), v.size() * sizeof(float));
  }
}

Result<GptWeights> LoadGptCheckpoint(const std::string& path, const std::string& config_path,
                                     const std::vector<std::string>& overrides) {
  LS_ASSIGN_OR_RETURN(const std::string dir, checkpoint::ResolveCheckpointPath(path));
  LS_ASSIGN_OR_RETURN(checkpoint::Checkpoint ckpt, checkpoint::Checkpoint::Open(dir));
  GptWeights w;
  w.source = dir;
  if (!config_path.empty()) {
    LS_ASSIGN_OR_RETURN(Config config, Config::LoadFile(config_path, overrides));
    LS_ASSIGN_OR_RETURN(w.config, nn::ReadGptConfig(config));
  } else if (auto it = ckpt.extra().find("model"); it != ckpt.extra().end()) {
    LS_ASSIGN_OR_RETURN(w.config, GptConfigFromJson(*it, dir + "/manifest.json"));
  } else {
    return Status::InvalidArgument(dir +
                                   ": the checkpoint does not describe its model (written before lockstep 0.7); "
                                   "pass the run's --config");
  }
  nn::Gpt probe(w.config, nn::Gpt::InferenceOnly{});
  for (const nn::ParamInfo& p : probe.params()) {
    const std::string name = "model." + p.name;
    const checkpoint::TensorInfo* info = ckpt.Find(name);
    if (info == nullptr)
      return Status::InvalidArgument(dir + ": checkpoint has no tensor '" + name + "' (another model?)");
    if (info->dtype != checkpoint::DType::kF32)
      return Status::InvalidArgument(dir + ": tensor '" + name + "' is not stored as f32");
    if (info->shape != p.shape)
      return Status::InvalidArgument(dir + ": tensor '" + name + "' has another shape than the model's");
    std::vector<float>& v = w.tensors[p.name];
    v.resize(static_cast<size_t>(p.numel));
    LS_RETURN_IF_ERROR(ckpt.Read(name, 0, p.numel, v.data()));
  }
  return w;
}

}  // namespace lockstep::interop
