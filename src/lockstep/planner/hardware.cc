// The described machine and the model shape of `lockstep plan --hardware` (hardware.h), read from
// the hardware file and the config.
#include "lockstep/planner/hardware.h"

#include <toml++/toml.h>

#include <utility>

namespace lockstep::planner {
namespace {

// A required number of the hardware file: present, a number, within [lo, hi].
Status Field(const toml::table& t, const std::string& path, const char* key, double lo, double hi, double* out) {
  const toml::node_view<const toml::node> n = t.at_path(key);
  std::optional<double> v = n.value<double>();
  if (!n) return Status::InvalidArgument(path + ": '" + key + "' is missing");
  if (!v) return Status::InvalidArgument(path + ": '" + key + "' must be a number");
  if (!(*v >= lo && *v <= hi))
    return Status::InvalidArgument(path + ": '" + key + "' = " + std::to_string(*v) + " is out of range [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = *v;
  return Status::Ok();
}

Status ReadLink(const toml::table& t, const std::string& path, const std::string& section, Link* l) {
  LS_RETURN_IF_ERROR(Field(t, path, (section + ".bandwidth_gbs").c_str(), 1e-6, 1e9, &l->bandwidth_gbs));
  LS_RETURN_IF_ERROR(Field(t, path, (section + ".latency_us").c_str(), 0, 1e9, &l->latency_us));
  return Field(t, path, (section + ".efficiency").c_str(), 1e-6, 1, &l->efficiency);
}

}  // namespace

Result<Hardware> ReadHardware(const std::string& path) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument("--hardware " + path + ": " + std::string(e.description()));
  }
  Hardware hw;
  hw.name = t["name"].value_or(std::string(path));
  double devices = 0;
  LS_RETURN_IF_ERROR(Field(t, path, "node.devices", 1, 1e6, &devices));
  hw.devices_per_node = static_cast<int>(devices);
  LS_RETURN_IF_ERROR(Field(t, path, "device.memory_gib", 1e-6, 1e9, &hw.memory_gib));
  LS_RETURN_IF_ERROR(Field(t, path, "device.peak_tflops_bf16", 1e-6, 1e9, &hw.peak_tflops_bf16));
  LS_RETURN_IF_ERROR(Field(t, path, "device.peak_tflops_fp32", 1e-6, 1e9, &hw.peak_tflops_fp32));
  LS_RETURN_IF_ERROR(Field(t, path, "device.matmul_efficiency", 1e-6, 1, &hw.matmul_efficiency));
  LS_RETURN_IF_ERROR(Field(t, path, "device.attention_efficiency", 1e-6, 1, &hw.attention_efficiency));
  hw.attention_bwd_efficiency = hw.attention_efficiency;
  if (t.at_path("device.attention_bwd_efficiency"))
    LS_RETURN_IF_ERROR(Field(t, path, "device.attention_bwd_efficiency", 1e-6, 1, &hw.attention_bwd_efficiency));
  LS_RETURN_IF_ERROR(Field(t, path, "device.memory_gbs", 1e-6, 1e9, &hw.memory_gbs));
  LS_RETURN_IF_ERROR(Field(t, path, "device.memory_efficiency", 1e-6, 1, &hw.memory_efficiency));
  LS_RETURN_IF_ERROR(ReadLink(t, path, "intra_node", &hw.intra));
  LS_RETURN_IF_ERROR(ReadLink(t, path, "inter_node", &hw.inter));
  return hw;
}

int64_t ModelShape::LayerParams() const {
  const int64_t h = width, kv = kv_heads * (width / heads);
  if (!llama) return 12 * h * h + 13 * h;
  return h * (h + 2 * kv) + h * h + 3 * h * ffn + 2 * h;
}
int64_t ModelShape::EmbeddingParams() const { return vocab * width + (llama ? 0 : context * width); }
int64_t ModelShape::HeadParams() const { return llama ? vocab * width + width : 0; }
int64_t ModelShape::TotalParams() const {
  return layers * LayerParams() + EmbeddingParams() + HeadParams() + (llama ? 0 : 2 * width);
}

Result<ModelShape> ReadModelShape(const Config& config) {
  ModelShape m;
  LS_ASSIGN_OR_RETURN(std::string kind, config.GetString("model.kind", ""));
  if (kind != "gpt" && kind != "llama")
    return Status::InvalidArgument("--hardware plans a transformer: model.kind must be \"gpt\" or \"llama\", got \"" +
                                   kind + "\"");
  m.llama = kind == "llama";
  LS_ASSIGN_OR_RETURN(m.vocab, config.GetInt("model.vocab", 256));
  LS_ASSIGN_OR_RETURN(m.context, config.GetInt("model.context", 128));
  LS_ASSIGN_OR_RETURN(m.layers, config.GetInt("model.layers", 4));
  LS_ASSIGN_OR_RETURN(m.heads, config.GetInt("model.heads", 4));
  LS_ASSIGN_OR_RETURN(m.width, config.GetInt("model.width", 128));
  LS_ASSIGN_OR_RETURN(int64_t ratio, config.GetInt("model.mlp_ratio", 4));
  LS_ASSIGN_OR_RETURN(m.kv_heads, config.GetInt("model.kv_heads", m.heads));
  LS_ASSIGN_OR_RETURN(m.ffn, config.GetInt("model.ffn_hidden", ratio * m.width));
  for (auto [key, v] : {std::pair<const char*, int64_t>{"model.vocab", m.vocab},
                        {"model.context", m.context},
                        {"model.layers", m.layers},
                        {"model.heads", m.heads},
                        {"model.width", m.width},
                        {"model.kv_heads", m.kv_heads},
                        {"model.ffn_hidden", m.ffn}})
    if (v < 1) return Status::InvalidArgument(std::string(key) + ": " + std::to_string(v) + " must be at least 1");
  if (m.width % m.heads || m.heads % m.kv_heads)
    return Status::InvalidArgument("model.width must divide by model.heads, and model.heads by model.kv_heads");
  return m;
}

}  // namespace lockstep::planner
