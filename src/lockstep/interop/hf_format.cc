#include "lockstep/interop/hf_format.h"

#include <algorithm>

namespace lockstep::interop {
namespace {

// out[c * rows + r] = in[r * cols + c]: [rows, cols] -> [cols, rows].
std::vector<float> Transpose(const std::vector<float>& in, int64_t rows, int64_t cols) {
  std::vector<float> out(in.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
  return out;
}

struct Mapping {
  std::string ours, hf;
  bool conv1d = false;  // HF stores the transpose
};

std::vector<Mapping> BlockMappings(int64_t layers) {
  std::vector<Mapping> m;
  for (int64_t i = 0; i < layers; ++i) {
    const std::string o = "blocks." + std::to_string(i) + ".", h = "transformer.h." + std::to_string(i) + ".";
    m.push_back({o + "ln1.weight", h + "ln_1.weight"});
    m.push_back({o + "ln1.bias", h + "ln_1.bias"});
    m.push_back({o + "qkv.weight", h + "attn.c_attn.weight", true});
    m.push_back({o + "qkv.bias", h + "attn.c_attn.bias"});
    m.push_back({o + "proj.weight", h + "attn.c_proj.weight", true});
    m.push_back({o + "proj.bias", h + "attn.c_proj.bias"});
    m.push_back({o + "ln2.weight", h + "ln_2.weight"});
    m.push_back({o + "ln2.bias", h + "ln_2.bias"});
    m.push_back({o + "fc.weight", h + "mlp.c_fc.weight", true});
    m.push_back({o + "fc.bias", h + "mlp.c_fc.bias"});
    m.push_back({o + "fc2.weight", h + "mlp.c_proj.weight", true});
    m.push_back({o + "fc2.bias", h + "mlp.c_proj.bias"});
  }
  return m;
}

std::vector<int64_t> ShapeOf(const nn::Gpt& probe, const std::string& name) {
  const nn::ParamInfo& p = probe.params().info(probe.params().Find(name));
  return std::vector<int64_t>(p.shape.begin(), p.shape.end());
}

// "[a,b]", appended piece by piece (GCC 12's -Wrestrict misfires on chains of operator+).
std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

}  // namespace

std::vector<HfTensor> ToHf(const GptWeights& w) {
  const nn::GptConfig& c = w.config;
  const int64_t V = c.vocab, C = c.width;
  nn::Gpt probe(c, nn::Gpt::InferenceOnly{});
  std::vector<HfTensor> out;
  auto rows = [&](const std::string& name) {  // the first V rows: padding dropped
    const std::vector<float>& v = w.tensors.at(name);
    return std::vector<float>(v.begin(), v.begin() + V * C);
  };
  out.push_back({"transformer.wte.weight", {V, C}, rows("wte.weight")});
  out.push_back({"transformer.wpe.weight", ShapeOf(probe, "wpe.weight"), w.tensors.at("wpe.weight")});
  for (const Mapping& m : BlockMappings(c.layers)) {
    std::vector<int64_t> shape = ShapeOf(probe, m.ours);
    const std::vector<float>& v = w.tensors.at(m.ours);
    if (m.conv1d)
      out.push_back({m.hf, {shape[1], shape[0]}, Transpose(v, shape[0], shape[1])});
    else
      out.push_back({m.hf, shape, v});
  }
  out.push_back({"transformer.ln_f.weight", {C}, w.tensors.at("lnf.weight")});
  out.push_back({"transformer.ln_f.bias", {C}, w.tensors.at("lnf.bias")});
  if (!c.tie_embeddings) out.push_back({"lm_head.weight", {V, C}, rows("head.weight")});
  return out;
}

nlohmann::json HfConfigJson(const nn::GptConfig& c, StDType dtype) {
  nlohmann::json j = {{"model_type", "gpt2"},
                      {"architectures", {"GPT2LMHeadModel"}},
                      {"vocab_size", c.vocab},
                      {"n_positions", c.context},
                      {"n_ctx", c.context},
                      {"n_embd", c.width},
                      {"n_layer", c.layers},
                      {"n_head", c.heads},
                      {"n_inner", c.mlp_ratio * c.width},
                      {"activation_function", "gelu_new"},
                      {"layer_norm_epsilon", 1e-5},
                      {"tie_word_embeddings", c.tie_embeddings},
                      {"resid_pdrop", 0.0},
                      {"embd_pdrop", 0.0},
                      {"attn_pdrop", 0.0},
                      {"initializer_range", 0.02},
                      {"scale_attn_weights", true},
                      {"use_cache", true},
                      {"torch_dtype", dtype == StDType::kF32 ? "float32" : "bfloat16"}};
  if (c.vocab == 50257) j["bos_token_id"] = j["eos_token_id"] = 50256;  // GPT-2's <|endoftext|>
  return j;
}

Result<nn::GptConfig> GptConfigFromHf(const nlohmann::json& j, const std::string& where) {
  nn::GptConfig c;
  try {
    if (j.value("model_type", "") != "gpt2") return Status::InvalidArgument(where + ": model_type is not \"gpt2\"");
    c.vocab = j.at("vocab_size").get<int64_t>();
    c.context = j.at("n_positions").get<int64_t>();
    c.width = j.at("n_embd").get<int64_t>();
    c.layers = j.at("n_layer").get<int64_t>();
    c.heads = j.at("n_head").get<int64_t>();
    const nlohmann::json inner = j.value("n_inner", nlohmann::json(nullptr));
    const int64_t hidden = inner.is_null() ? 4 * c.width : inner.get<int64_t>();
    if (hidden % c.width != 0)
      return Status::InvalidArgument(where + ": n_inner " + std::to_string(hidden) + " is not a multiple of n_embd");
    c.mlp_ratio = hidden / c.width;
    c.tie_embeddings = j.value("tie_word_embeddings", true);
    const std::string act = j.value("activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
      return Status::InvalidArgument(where + ": activation_function \"" + act + "\" (lockstep's GPT uses tanh GELU)");
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(where + ": " + e.what());
  }
  Status valid = nn::ValidateGptConfig(c);
  if (!valid.ok()) return Status::InvalidArgument(where + ": " + valid.message());
  return c;
}

Result<parallel::CanonicalTensors> FromHf(const nn::GptConfig& target, const std::map<std::string, StTensorIn>& hf,
                                          bool hf_tied, parallel::CanonicalTensors fresh, const std::string& where) {
  if (target.tie_embeddings && !hf_tied)
    return Status::InvalidArgument(where +
                                   ": the model is untied (it has lm_head.weight) but model.tie_embeddings "
                                   "is true");
  nn::Gpt probe(target, nn::Gpt::InferenceOnly{});
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) -> Result<const StTensorIn*> {
    auto it = hf.find(name);
    if (it == hf.end()) return Status::InvalidArgument(where + ": no tensor '" + name + "'");
    if (it->second.shape != shape) {
      return Status::InvalidArgument(where + ": tensor '" + name + "' has shape " + ShapeText(it->second.shape) +
                                     ", the model needs " + ShapeText(shape));
    }
    return &it->second;
  };
  const int64_t V = target.vocab, C = target.width;
  auto rows_into = [&](const std::string& ours, const StTensorIn& t) {
    std::copy(t.values.begin(), t.values.end(), fresh.at(ours).begin());  // the first V rows
  };
  LS_ASSIGN_OR_RETURN(const StTensorIn* wte, get("transformer.wte.weight", {V, C}));
  rows_into("wte.weight", *wte);
  if (!target.tie_embeddings) {
    const StTensorIn* head = wte;
    if (!hf_tied) {
      LS_ASSIGN_OR_RETURN(head, get("lm_head.weight", {V, C}));
    }
    rows_into("head.weight", *head);
  }
  LS_ASSIGN_OR_RETURN(const StTensorIn* wpe, get("transformer.wpe.weight", ShapeOf(probe, "wpe.weight")));
  fresh.at("wpe.weight") = wpe->values;
  std::vector<Mapping> all = BlockMappings(target.layers);
  all.push_back({"lnf.weight", "transformer.ln_f.weight"});
  all.push_back({"lnf.bias", "transformer.ln_f.bias"});
  for (const Mapping& m : all) {
    const std::vector<int64_t> shape = ShapeOf(probe, m.ours);
    if (m.conv1d) {
      LS_ASSIGN_OR_RETURN(const StTensorIn* t, get(m.hf, {shape[1], shape[0]}));
      fresh.at(m.ours) = Transpose(t->values, shape[1], shape[0]);
    } else {
      LS_ASSIGN_OR_RETURN(const StTensorIn* t, get(m.hf, shape));
      fresh.at(m.ours) = t->values;
    }
  }
  return fresh;
}

}  // namespace lockstep::interop
