#include "lockstep/interop/llmc_format.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "lockstep/core/bf16.h"

namespace lockstep::interop {
namespace {

// llm.c's parameter tensors: (lockstep name pattern, per-layer or not).
struct Part {
  std::string suffix;  // "wte.weight" or a block tensor "qkv.weight"
  bool per_layer;
};
const std::vector<Part>& Parts() {
  static const std::vector<Part> parts = {
      {"wte.weight", false}, {"wpe.weight", false}, {"ln1.weight", true},  {"ln1.bias", true},
      {"qkv.weight", true},  {"qkv.bias", true},    {"proj.weight", true}, {"proj.bias", true},
      {"ln2.weight", true},  {"ln2.bias", true},    {"fc.weight", true},   {"fc.bias", true},
      {"fc2.weight", true},  {"fc2.bias", true},    {"lnf.weight", false}, {"lnf.bias", false}};
  return parts;
}

// Calls fn(lockstep name) in file order.
template <typename Fn>
void ForEachInFileOrder(int64_t layers, Fn&& fn) {
  for (const Part& p : Parts()) {
    if (!p.per_layer) {
      fn(p.suffix);
      continue;
    }
    for (int64_t l = 0; l < layers; ++l) fn("blocks." + std::to_string(l) + "." + p.suffix);
  }
}

}  // namespace

Status WriteLlmcModel(const std::string& path, const GptWeights& w, StDType dtype) {
  const nn::GptConfig& c = w.config;
  if (!c.tie_embeddings)
    return Status::InvalidArgument(
        "llm.c's GPT-2 ties its head to wte; this model is untied "
        "(model.tie_embeddings = false): export it with --format hf");
  if (c.mlp_ratio != 4)
    return Status::InvalidArgument("llm.c's GPT-2 has a 4x MLP; this model has model.mlp_ratio = " +
                                   std::to_string(c.mlp_ratio));
  std::vector<int32_t> header(256, 0);
  header[0] = kLlmcModelMagic;
  header[1] = dtype == StDType::kF32 ? 3 : 5;
  header[2] = static_cast<int32_t>(c.context);
  header[3] = static_cast<int32_t>(c.vocab);
  header[4] = static_cast<int32_t>(c.layers);
  header[5] = static_cast<int32_t>(c.heads);
  header[6] = static_cast<int32_t>(c.width);
  header[7] = static_cast<int32_t>(c.padded_vocab());
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Status::InvalidArgument("cannot write " + tmp + ": " + std::strerror(errno));
  bool ok = std::fwrite(header.data(), sizeof(int32_t), header.size(), f) == header.size();
  std::vector<uint16_t> half;
  ForEachInFileOrder(c.layers, [&](const std::string& name) {
    const std::vector<float>& v = w.tensors.at(name);
    if (dtype == StDType::kF32) {
      ok = ok && std::fwrite(v.data(), sizeof(float), v.size(), f) == v.size();
    } else {
      half.resize(v.size());
      F32ToBf16(v.data(), half.data(), v.size());
      ok = ok && std::fwrite(half.data(), sizeof(uint16_t), half.size(), f) == half.size();
    }
  });
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::IoError("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Result<GptWeights> ReadLlmcModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("llm.c model file " + path + " does not exist or cannot be read");
  std::vector<int32_t> h(256);
  if (!in.read(reinterpret_cast<char*>(h.data()), 1024))
    return Status::InvalidArgument(path + ": shorter than llm.c's 1024-byte header");
  if (h[0] != kLlmcModelMagic)
    return Status::InvalidArgument(path + ": magic " + std::to_string(h[0]) + ", not llm.c's model magic 20240326" +
                                   (h[0] == 20240520 ? " (this is a token file)" : ""));
  if (h[1] != 3 && h[1] != 5)
    return Status::InvalidArgument(path + ": llm.c version " + std::to_string(h[1]) +
                                   ", expected 3 (fp32) or 5 (bf16)");
  GptWeights w;
  w.source = path;
  nn::GptConfig& c = w.config;
  c.context = h[2];
  c.vocab = h[3];
  c.layers = h[4];
  c.heads = h[5];
  c.width = h[6];
  c.mlp_ratio = 4;
  c.tie_embeddings = true;
  const int64_t vp = h[7];
  if (vp < c.vocab)
    return Status::InvalidArgument(path + ": padded vocabulary " + std::to_string(vp) + " < " +
                                   std::to_string(c.vocab));
  c.vocab_pad = (c.vocab + 63) / 64 * 64 == vp ? 64 : vp;
  Status valid = nn::ValidateGptConfig(c);
  if (!valid.ok()) return Status::InvalidArgument(path + ": " + valid.message());
  nn::Gpt probe(c, nn::Gpt::InferenceOnly{});
  const int64_t width = h[1] == 3 ? 4 : 2;
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (size != 1024 + probe.params().numel() * width)
    return Status::InvalidArgument(path + ": " + std::to_string(size) + " bytes, the header's model needs " +
                                   std::to_string(1024 + probe.params().numel() * width));
  in.seekg(1024);
  std::vector<uint16_t> half;
  bool ok = true;
  ForEachInFileOrder(c.layers, [&](const std::string& name) {
    const nn::ParamInfo& p = probe.params().info(probe.params().Find(name));
    std::vector<float>& v = w.tensors[name];
    v.resize(static_cast<size_t>(p.numel));
    if (width == 4) {
      ok = ok && static_cast<bool>(in.read(reinterpret_cast<char*>(v.data()), p.numel * 4));
    } else {
      half.resize(v.size());
      ok = ok && static_cast<bool>(in.read(reinterpret_cast<char*>(half.data()), p.numel * 2));
      Bf16ToF32(half.data(), v.data(), v.size());
    }
  });
  if (!ok) return Status::InvalidArgument(path + ": truncated");
  return w;
}

}  // namespace lockstep::interop
