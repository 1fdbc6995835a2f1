// A Hugging Face checkpoint of SmolLM2-135M's shape, as one is downloaded: config.json as
// HuggingFaceTB/SmolLM2-135M ships it (bf16, rope_theta 100000, tied, 8192 positions, the keys
// lockstep does not use beside those it does) and bf16 safetensors under transformers' names,
// written here from the model's definition with random weights. configs/smollm2-135m.toml
// imports it split three ways (tp = 3: the 9 query heads and 3 key/value heads one group a
// rank; SmolLM2's 9 heads cannot be split over 2), trains two steps and exports in bf16. The
// steps run at lr 1e-30, which changes no weight, so the export must give back the downloaded
// bytes: every name, shape and value went in and out through the split model unchanged.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <random>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool norm;  // RMSNorm weights: around 1
};

std::vector<HfTensor> SmolLm2Tensors() {
  const int64_t width = 576, q = 9 * 64, kv = 3 * 64, ffn = 1536;
  std::vector<HfTensor> t = {{"model.embed_tokens.weight", {49152, width}, false}};
  for (int i = 0; i < 30; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {width}, true});
    t.push_back({p + "self_attn.q_proj.weight", {q, width}, false});
    t.push_back({p + "self_attn.k_proj.weight", {kv, width}, false});
    t.push_back({p + "self_attn.v_proj.weight", {kv, width}, false});
    t.push_back({p + "self_attn.o_proj.weight", {width, q}, false});
    t.push_back({p + "post_attention_layernorm.weight", {width}, true});
    t.push_back({p + "mlp.gate_proj.weight", {ffn, width}, false});
    t.push_back({p + "mlp.up_proj.weight", {ffn, width}, false});
    t.push_back({p + "mlp.down_proj.weight", {width, ffn}, false});
  }
  t.push_back({"model.norm.weight", {width}, true});
  return t;  // tied: no lm_head.weight
}

uint16_t Bf16(float f) {  // truncated: whatever it gives is a bf16 value
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

// model.safetensors in bf16 (8-byte header length, JSON header, data) with the tensors in
// SmolLm2Tensors' order; weights in +-0.04 and norms in (0.5, 1.5), none 0, each a bf16 value.
void WriteCheckpoint(const std::string& dir) {
  const std::vector<HfTensor> tensors = SmolLm2Tensors();
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  int64_t offset = 0;
  for (const HfTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    header[t.name] = {{"dtype", "BF16"}, {"shape", t.shape}, {"data_offsets", {offset, offset + 2 * n}}};
    offset += 2 * n;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream f(dir + "/model.safetensors", std::ios::binary);
  const uint64_t len = h.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  std::mt19937 rng(135);
  std::uniform_int_distribution<int> bits(0, 255);
  for (const HfTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (uint16_t& x : v) {
      // Never 0: a 1e-30 step would move an exact zero (by ~1e-31), and nothing else.
      const float odd = static_cast<float>(2 * bits(rng) - 255) / 256.0f;  // in (-1, 1), 8 bits
      x = Bf16(t.norm ? 1.0f + 0.5f * odd : 0.04f * odd);
    }
    f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(2 * n));
  }
  ASSERT_TRUE(f.good());
  // HuggingFaceTB/SmolLM2-135M's config.json (transformers 4.40), unused keys included.
  std::ofstream(dir + "/config.json") << R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": true,
  "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9,
  "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_interleaved": false, "rope_scaling": null, "rope_theta": 100000, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true, "vocab_size": 49152
})";
}

std::string Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// name -> (dtype, shape, the tensor's bytes) of a safetensors file, read from the format's
// definition (a writer may order its tensors as it likes).
std::map<std::string, std::tuple<std::string, std::vector<int64_t>, std::string>> Tensors(const std::string& path) {
  const std::string all = Bytes(path);
  std::map<std::string, std::tuple<std::string, std::vector<int64_t>, std::string>> out;
  if (all.size() < 8) return out;
  uint64_t len = 0;
  std::memcpy(&len, all.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(all.substr(8, len));
  const size_t data = 8 + len;
  for (const auto& [name, t] : header.items()) {
    if (name == "__metadata__") continue;
    const size_t begin = t["data_offsets"][0].get<size_t>(), end = t["data_offsets"][1].get<size_t>();
    out[name] = {t["dtype"].get<std::string>(), t["shape"].get<std::vector<int64_t>>(),
                 all.substr(data + begin, end - begin)};
  }
  return out;
}

TEST(LlamaSmolLm2, ADownloadedCheckpointImportsTrainsSplitThreeWaysAndExportsTheSameBytes) {
  const std::string hf = MakeTempDir("smollm2-hf"), run = MakeTempDir("smollm2-run"), out = MakeTempDir("smollm2-out");
  WriteCheckpoint(hf);
  CommandResult r = RunLockstep({"train", "--config", "configs/smollm2-135m.toml", "--init-from", "hf:" + hf,
                                 "--nproc", "3", "--layout", "tp=3", "--steps", "2", "--out", run,
                                 // Bytes for data (ids < 256 are valid SmolLM2 ids); a short context.
                                 "--set", "data.kind=text", "--set", "data.dir=/usr/share/games/fortunes", "--set",
                                 "model.context=64", "--set", "train.batch_size=3", "--set", "optim.lr=1e-30",
                                 "--set", "optim.min_lr=0", "--set", "eval.every=0", "--set", "eval.batches=1",
                                 "--set", "checkpoint.every=0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(WhatRan(run), "dp=1,tp=3,pp=1 zero=0 world=3 threads");
  // Random weights of this scale predict about uniformly: the loss is near ln(49152) = 10.8.
  double loss = 0;
  for (const std::string& l : ReadLines(run + "/metrics.jsonl"))
    if (auto j = nlohmann::json::parse(l); j.contains("loss")) loss = j["loss"].get<double>();
  EXPECT_NEAR(loss, 10.8, 0.5);
  CommandResult e = RunLockstep({"export", run, "--format", "hf", "--dtype", "bf16", "--out", out});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const auto in = Tensors(hf + "/model.safetensors"), back = Tensors(out + "/model.safetensors");
  EXPECT_EQ(back.size(), in.size());
  for (const auto& [name, t] : in) {
    auto it = back.find(name);
    if (it == back.end()) {
      ADD_FAILURE() << name << " is not in the export";
      continue;
    }
    EXPECT_EQ(std::get<0>(it->second), "BF16") << name;
    EXPECT_EQ(std::get<1>(it->second), std::get<1>(t)) << name;
    EXPECT_TRUE(std::get<2>(it->second) == std::get<2>(t)) << name << ": the exported values differ";
  }
  const nlohmann::json config = nlohmann::json::parse(Bytes(out + "/config.json"));
  EXPECT_EQ(config["num_attention_heads"], 9);
  EXPECT_EQ(config["num_key_value_heads"], 3);
  EXPECT_EQ(config["rope_theta"], 100000.0);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
  // 2.2 GB of files (the checkpoint holds AdamW's moments): kept only when something failed.
  if (!::testing::Test::HasFailure())
    for (const std::string& d : {hf, run, out}) std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace lockstep::testing
