#include "lockstep/interop/llama_hf.h"

#include <algorithm>

namespace lockstep::interop {
namespace {

bool IsVocabRows(const std::string& name) { return name == "embed_tokens.weight" || name == "lm_head.weight"; }

std::string HfName(const std::string& ours) { return ours == "lm_head.weight" ? ours : "model." + ours; }

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

// The rotary settings of a config.json, in either spelling: transformers <= 4.x has rope_theta
// beside rope_scaling ({"rope_type" or "type": ...} or null); 5.x has rope_parameters
// ({"rope_type", "rope_theta", ...}).
Status ReadRope(const nlohmann::json& j, nn::LlamaConfig* c, const std::string& where) {
  nlohmann::json scaling = j.value("rope_scaling", nlohmann::json(nullptr));
  std::string key = "rope_scaling";
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    scaling = j["rope_parameters"];
    key = "rope_parameters";
    if (scaling.contains("rope_theta")) c->rope_theta = scaling["rope_theta"].get<double>();
  } else if (j.contains("rope_theta")) {
    c->rope_theta = j["rope_theta"].get<double>();
  }
  if (scaling.is_null()) return Status::Ok();
  if (!scaling.is_object()) return Status::InvalidArgument(where + ": " + key + " is not an object");
  const std::string type = scaling.value("rope_type", scaling.value("type", std::string("default")));
  if (type == "default") return Status::Ok();
  if (type != "llama3")
    return Status::InvalidArgument(where + ": " + key + " type \"" + type +
                                   "\" is not implemented (lockstep has default and llama3)");
  nn::RopeScaling& r = c->rope_scaling;
  r.type = "llama3";
  r.factor = scaling.at("factor").get<double>();
  r.low_freq_factor = scaling.at("low_freq_factor").get<double>();
  r.high_freq_factor = scaling.at("high_freq_factor").get<double>();
  r.original_context = scaling.at("original_max_position_embeddings").get<int64_t>();
  return Status::Ok();
}

}  // namespace

std::vector<HfTensor> LlamaToHf(const LlamaWeights& w) {
  const nn::LlamaConfig& c = w.config;
  nn::Llama probe(c, nn::Llama::InferenceOnly{});
  std::vector<HfTensor> out;
  for (const nn::ParamInfo& p : probe.params()) {  // forward order: HF's state-dict order
    const std::vector<float>& v = w.tensors.at(p.name);
    std::vector<int64_t> shape(p.shape.begin(), p.shape.end());
    if (IsVocabRows(p.name)) {  // the first vocab rows: padding dropped
      shape[0] = c.vocab;
      out.push_back({HfName(p.name), shape, std::vector<float>(v.begin(), v.begin() + c.vocab * c.width)});
    } else {
      out.push_back({HfName(p.name), shape, v});
    }
  }
  return out;
}

nlohmann::json LlamaHfConfigJson(const nn::LlamaConfig& c, StDType dtype) {
  nlohmann::json scaling = nullptr;
  if (c.rope_scaling.type == "llama3") {
    const nn::RopeScaling& r = c.rope_scaling;
    scaling = {{"rope_type", "llama3"},
               {"factor", r.factor},
               {"low_freq_factor", r.low_freq_factor},
               {"high_freq_factor", r.high_freq_factor},
               {"original_max_position_embeddings", r.original_context}};
  }
  return {{"model_type", "llama"},
          {"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", c.vocab},
          {"hidden_size", c.width},
          {"intermediate_size", c.ffn_hidden},
          {"num_hidden_layers", c.layers},
          {"num_attention_heads", c.heads},
          {"num_key_value_heads", c.kv_heads},
          {"head_dim", c.head_size()},
          {"hidden_act", "silu"},
          {"max_position_embeddings", c.context},
          {"rms_norm_eps", c.norm_eps},
          {"rope_theta", c.rope_theta},
          {"rope_scaling", scaling},
          {"tie_word_embeddings", c.tie_embeddings},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"attention_dropout", 0.0},
          {"initializer_range", 0.02},
          {"pretraining_tp", 1},
          {"use_cache", true},
          {"torch_dtype", dtype == StDType::kF32 ? "float32" : "bfloat16"}};
}

Result<nn::LlamaConfig> LlamaConfigFromHf(const nlohmann::json& j, const std::string& where) {
  nn::LlamaConfig c;
  try {
    const std::string type = j.value("model_type", std::string());
    if (type != "llama") {
      std::string arch;
      if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty())
        arch = " (" + j["architectures"][0].get<std::string>() + ")";
      return Status::InvalidArgument(where + ": model_type \"" + type + "\"" + arch +
                                     " is not a Llama; model.kind = \"llama\" imports model_type \"llama\"");
    }
    // transformers' LlamaConfig defaults where a key is absent or null.
    auto get = [&](const char* key, int64_t fallback) {
      return j.contains(key) && !j[key].is_null() ? j[key].get<int64_t>() : fallback;
    };
    c.vocab = get("vocab_size", 32000);
    c.width = get("hidden_size", 4096);
    c.ffn_hidden = get("intermediate_size", 11008);
    c.layers = get("num_hidden_layers", 32);
    c.heads = get("num_attention_heads", 32);
    c.kv_heads = get("num_key_value_heads", c.heads);
    c.head_dim = get("head_dim", 0);
    c.context = get("max_position_embeddings", 2048);
    c.norm_eps = j.value("rms_norm_eps", 1e-6);
    c.tie_embeddings = j.value("tie_word_embeddings", false);
    const std::string act = j.value("hidden_act", std::string("silu"));
    if (act != "silu")
      return Status::InvalidArgument(where + ": hidden_act \"" + act + "\" (lockstep's Llama uses silu)");
    for (const char* bias : {"attention_bias", "mlp_bias"})
      if (j.value(bias, false))
        return Status::InvalidArgument(where + ": " + bias + " is true (lockstep's Llama has no biases)");
    LS_RETURN_IF_ERROR(ReadRope(j, &c, where));
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(where + ": " + e.what());
  }
  if (c.head_dim == c.width / c.heads && c.width % c.heads == 0) c.head_dim = 0;  // the default, as configs say
  Status valid = nn::ValidateLlamaConfig(c);
  if (!valid.ok()) return Status::InvalidArgument(where + ": " + valid.message());
  return c;
}

Result<parallel::CanonicalTensors> LlamaFromHf(const nn::LlamaConfig& target,
                                               const std::map<std::string, StTensorIn>& hf, bool hf_tied,
                                               parallel::CanonicalTensors fresh, const std::string& where) {
  if (target.tie_embeddings && !hf_tied)
    return Status::InvalidArgument(where + ": the model is untied (it has lm_head.weight) but model.tie_embeddings "
                                           "is true");
  nn::Llama probe(target, nn::Llama::InferenceOnly{});
  for (const nn::ParamInfo& p : probe.params()) {
    std::vector<int64_t> shape(p.shape.begin(), p.shape.end());
    std::string name = HfName(p.name);
    if (p.name == "lm_head.weight" && hf_tied) name = "model.embed_tokens.weight";
    if (IsVocabRows(p.name)) shape[0] = target.vocab;
    auto it = hf.find(name);
    if (it == hf.end()) return Status::InvalidArgument(where + ": no tensor '" + name + "'");
    if (it->second.shape != shape)
      return Status::InvalidArgument(where + ": tensor '" + name + "' has shape " + ShapeText(it->second.shape) +
                                     ", the model needs " + ShapeText(shape));
    std::vector<float>& dst = fresh.at(p.name);
    std::copy(it->second.values.begin(), it->second.values.end(), dst.begin());  // padding rows stay
  }
  return fresh;
}

}  // namespace lockstep::interop
