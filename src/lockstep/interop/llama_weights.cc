#include "lockstep/interop/llama_weights.h"

#include <cstdio>

#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/resolve.h"

namespace lockstep::interop {

nlohmann::json LlamaConfigToJson(const nn::LlamaConfig& c) {
  const nn::RopeScaling& r = c.rope_scaling;
  return {{"kind", "llama"},
          {"vocab", c.vocab},
          {"vocab_pad", c.vocab_pad},
          {"tie_embeddings", c.tie_embeddings},
          {"context", c.context},
          {"layers", c.layers},
          {"heads", c.heads},
          {"kv_heads", c.kv_heads},
          {"width", c.width},
          {"ffn_hidden", c.ffn_hidden},
          {"head_dim", c.head_size()},
          {"rope_theta", c.rope_theta},
          {"norm_eps", c.norm_eps},
          {"rope_scaling",
           {{"type", r.type},
            {"factor", r.factor},
            {"low_freq_factor", r.low_freq_factor},
            {"high_freq_factor", r.high_freq_factor},
            {"original_context", r.original_context}}}};
}

Result<nn::LlamaConfig> LlamaConfigFromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || j.value("kind", "") != "llama")
    return Status::InvalidArgument(where + ": the model is not a Llama (model.kind must be \"llama\")");
  nn::LlamaConfig c;
  try {
    c.vocab = j.at("vocab").get<int64_t>();
    c.vocab_pad = j.value("vocab_pad", int64_t{1});
    c.tie_embeddings = j.value("tie_embeddings", false);
    c.context = j.at("context").get<int64_t>();
    c.layers = j.at("layers").get<int64_t>();
    c.heads = j.at("heads").get<int64_t>();
    c.kv_heads = j.at("kv_heads").get<int64_t>();
    c.width = j.at("width").get<int64_t>();
    c.ffn_hidden = j.at("ffn_hidden").get<int64_t>();
    c.head_dim = j.at("head_dim").get<int64_t>();
    c.rope_theta = j.at("rope_theta").get<double>();
    c.norm_eps = j.at("norm_eps").get<double>();
    const nlohmann::json& r = j.at("rope_scaling");
    c.rope_scaling.type = r.at("type").get<std::string>();
    c.rope_scaling.factor = r.at("factor").get<double>();
    c.rope_scaling.low_freq_factor = r.at("low_freq_factor").get<double>();
    c.rope_scaling.high_freq_factor = r.at("high_freq_factor").get<double>();
    c.rope_scaling.original_context = r.at("original_context").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(where + ": bad model description: " + e.what());
  }
  Status valid = nn::ValidateLlamaConfig(c);
  if (!valid.ok()) return Status::InvalidArgument(where + ": " + valid.message());
  return c;
}

Result<std::string> CheckpointModelKind(const std::string& path) {
  LS_ASSIGN_OR_RETURN(const std::string dir, checkpoint::ResolveCheckpointPath(path));
  LS_ASSIGN_OR_RETURN(checkpoint::Checkpoint ckpt, checkpoint::Checkpoint::Open(dir));
  auto it = ckpt.extra().find("model");
  if (it == ckpt.extra().end() || !it->is_object()) return std::string();
  return it->value("kind", std::string());
}

Result<LlamaWeights> LoadLlamaCheckpoint(const std::string& path) {
  LS_ASSIGN_OR_RETURN(const std::string dir, checkpoint::ResolveCheckpointPath(path));
  LS_ASSIGN_OR_RETURN(checkpoint::Checkpoint ckpt, checkpoint::Checkpoint::Open(dir));
  LlamaWeights w;
  w.source = dir;
  auto it = ckpt.extra().find("model");
  if (it == ckpt.extra().end())
    return Status::InvalidArgument(dir + ": the checkpoint does not describe its model");
  LS_ASSIGN_OR_RETURN(w.config, LlamaConfigFromJson(*it, dir + "/manifest.json"));
  nn::Llama probe(w.config, nn::Llama::InferenceOnly{});
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

parallel::CanonicalTensors FreshLlama(const nn::LlamaConfig& c) {
  nn::Llama llama(c, nn::Llama::InferenceOnly{});
  parallel::CanonicalTensors t;
  const float* flat = llama.params().flat_params();
  for (const nn::ParamInfo& p : llama.params()) t[p.name].assign(flat + p.offset, flat + p.offset + p.numel);
  return t;
}

Status SameLlamaArchitecture(const nn::LlamaConfig& src, const nn::LlamaConfig& dst, const std::string& where) {
  auto differ = [&](const char* key, const std::string& a, const std::string& b) {
    return Status::InvalidArgument(where + ": " + key + " is " + a + ", the config's is " + b);
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return std::string(buf);
  };
  const std::pair<const char*, std::pair<int64_t, int64_t>> ints[] = {
      {"model.vocab", {src.vocab, dst.vocab}},
      {"model.layers", {src.layers, dst.layers}},
      {"model.heads", {src.heads, dst.heads}},
      {"model.kv_heads", {src.kv_heads, dst.kv_heads}},
      {"model.width", {src.width, dst.width}},
      {"model.ffn_hidden", {src.ffn_hidden, dst.ffn_hidden}},
      {"model.head_dim", {src.head_size(), dst.head_size()}}};
  for (const auto& [key, v] : ints)
    if (v.first != v.second) return differ(key, std::to_string(v.first), std::to_string(v.second));
  if (src.rope_theta != dst.rope_theta) return differ("model.rope_theta", num(src.rope_theta), num(dst.rope_theta));
  if (src.norm_eps != dst.norm_eps) return differ("model.norm_eps", num(src.norm_eps), num(dst.norm_eps));
  const nn::RopeScaling &a = src.rope_scaling, &b = dst.rope_scaling;
  if (a.type != b.type) return differ("model.rope_scaling", "\"" + a.type + "\"", "\"" + b.type + "\"");
  if (a.type == "llama3") {
    if (a.factor != b.factor) return differ("model.rope_factor", num(a.factor), num(b.factor));
    if (a.low_freq_factor != b.low_freq_factor)
      return differ("model.rope_low_freq_factor", num(a.low_freq_factor), num(b.low_freq_factor));
    if (a.high_freq_factor != b.high_freq_factor)
      return differ("model.rope_high_freq_factor", num(a.high_freq_factor), num(b.high_freq_factor));
    if (a.original_context != b.original_context)
      return differ("model.rope_original_context", std::to_string(a.original_context),
                    std::to_string(b.original_context));
  }
  if (dst.tie_embeddings && !src.tie_embeddings)
    return Status::InvalidArgument(where + ": the model is untied, the config ties it (model.tie_embeddings)");
  return Status::Ok();
}

}  // namespace lockstep::interop
