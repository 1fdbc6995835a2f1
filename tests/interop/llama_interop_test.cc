// Export and import of Llama weights (interop/llama_hf.h): a hand-built tiny Llama with known
// values (grouped-query, padded vocabulary) exported to Hugging Face files, read back by the
// tests' own safetensors reader and checked against LlamaForCausalLM's names and shapes
// written out here; q_proj and k_proj must be stored as they are (rotate_half on both sides:
// a q/k permutation, as Meta-to-HF converters apply, would be a silent corruption); the round
// trip lockstep -> hf -> lockstep gives back the same bits; config.json in both of
// transformers' rotary spellings; what lockstep cannot represent is one line naming the key.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "interop/safetensors_reader.h"
#include "lockstep/interop/export.h"
#include "lockstep/interop/llama_hf.h"
#include "lockstep/interop/llama_weights.h"
#include "temp_dir.h"

namespace lockstep::interop {
namespace {

nn::LlamaConfig TinyConfig(bool tied) {
  nn::LlamaConfig c;
  c.vocab = 10;
  c.vocab_pad = 16;  // 16 rows, 6 of them padding
  c.context = 4;
  c.layers = 2;
  c.heads = 2;
  c.kv_heads = 1;
  c.width = 8;
  c.ffn_hidden = 12;
  c.tie_embeddings = tied;
  return c;
}

// A value no two elements share: tensor number * 1000 + element index.
LlamaWeights KnownWeights(bool tied) {
  LlamaWeights w;
  w.config = TinyConfig(tied);
  w.source = "test";
  nn::Llama probe(w.config, nn::Llama::InferenceOnly{});
  int k = 1;
  for (const nn::ParamInfo& p : probe.params()) {
    std::vector<float>& v = w.tensors[p.name];
    for (int64_t i = 0; i < p.numel; ++i) v.push_back(static_cast<float>(k * 1000 + i));
    ++k;
  }
  return w;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

TEST(LlamaInterop, HfExportHasLlamaForCausalLMsNamesShapesAndValues) {
  for (bool tied : {false, true}) {
    const LlamaWeights w = KnownWeights(tied);
    const int64_t V = 10, C = 8, D = 4, H = 2, KV = 1, F = 12;
    const ::lockstep::testing::TempDir tmp;
    ExportOptions o;
    o.format = "hf";
    o.out = tmp.path() + "/hf";
    ASSERT_TRUE(ExportWeights(w, o).ok());
    nlohmann::json meta;
    auto t = ReadSafetensorsIndependently(o.out + "/model.safetensors", &meta);
    // HF name -> (lockstep tensor, HF shape), written from transformers' LlamaForCausalLM.
    struct Entry {
      std::string ours;
      std::vector<int64_t> shape;
    };
    std::map<std::string, Entry> table = {{"model.embed_tokens.weight", {"embed_tokens.weight", {V, C}}},
                                          {"model.norm.weight", {"norm.weight", {C}}}};
    if (!tied) table["lm_head.weight"] = {"lm_head.weight", {V, C}};
    for (int l = 0; l < 2; ++l) {
      const std::string ours = "layers." + std::to_string(l) + ".", hf = "model." + ours;
      table[hf + "input_layernorm.weight"] = {ours + "input_layernorm.weight", {C}};
      table[hf + "self_attn.q_proj.weight"] = {ours + "self_attn.q_proj.weight", {H * D, C}};
      table[hf + "self_attn.k_proj.weight"] = {ours + "self_attn.k_proj.weight", {KV * D, C}};
      table[hf + "self_attn.v_proj.weight"] = {ours + "self_attn.v_proj.weight", {KV * D, C}};
      table[hf + "self_attn.o_proj.weight"] = {ours + "self_attn.o_proj.weight", {C, H * D}};
      table[hf + "post_attention_layernorm.weight"] = {ours + "post_attention_layernorm.weight", {C}};
      table[hf + "mlp.gate_proj.weight"] = {ours + "mlp.gate_proj.weight", {F, C}};
      table[hf + "mlp.up_proj.weight"] = {ours + "mlp.up_proj.weight", {F, C}};
      table[hf + "mlp.down_proj.weight"] = {ours + "mlp.down_proj.weight", {C, F}};
    }
    ASSERT_EQ(t.size(), table.size()) << "tied " << tied;
    for (const auto& [hf, e] : table) {
      ASSERT_TRUE(t.count(hf)) << hf;
      EXPECT_EQ(t[hf].shape, e.shape) << hf;
      std::vector<float> want = w.tensors.at(e.ours);
      want.resize(static_cast<size_t>(t[hf].values.size()));  // embed/head: the padding rows dropped
      EXPECT_EQ(t[hf].values, want) << hf << " should hold " << e.ours << " as it is";
    }
    const nlohmann::json c = ReadJson(o.out + "/config.json");
    EXPECT_EQ(c["model_type"], "llama");
    EXPECT_EQ(c["architectures"], nlohmann::json({"LlamaForCausalLM"}));
    EXPECT_EQ(c["vocab_size"], V);
    EXPECT_EQ(c["hidden_size"], C);
    EXPECT_EQ(c["intermediate_size"], F);
    EXPECT_EQ(c["num_hidden_layers"], 2);
    EXPECT_EQ(c["num_attention_heads"], H);
    EXPECT_EQ(c["num_key_value_heads"], KV);
    EXPECT_EQ(c["head_dim"], D);
    EXPECT_EQ(c["max_position_embeddings"], 4);
    EXPECT_EQ(c["rms_norm_eps"], 1e-5);
    EXPECT_EQ(c["rope_theta"], 10000.0);
    EXPECT_TRUE(c["rope_scaling"].is_null());
    EXPECT_EQ(c["hidden_act"], "silu");
    EXPECT_EQ(c["tie_word_embeddings"], tied);
    EXPECT_EQ(c["torch_dtype"], "float32");
  }
}

TEST(LlamaInterop, HfRoundTripGivesTheSameBits) {
  for (bool tied : {false, true}) {
    const LlamaWeights w = KnownWeights(tied);
    const ::lockstep::testing::TempDir tmp;
    ExportOptions o;
    o.format = "hf";
    o.out = tmp.path() + "/hf";
    o.max_shard_bytes = 300;  // sharded, with an index
    ASSERT_TRUE(ExportWeights(w, o).ok());
    ASSERT_TRUE(std::ifstream(o.out + "/model.safetensors.index.json").good());
    Result<parallel::CanonicalTensors> back = LoadInitWeights("hf:" + o.out, w.config);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    const parallel::CanonicalTensors fresh = FreshLlama(w.config);
    ASSERT_EQ(back->size(), w.tensors.size());
    for (const auto& [name, values] : w.tensors) {
      std::vector<float> want = values;
      if (name == "embed_tokens.weight" || name == "lm_head.weight")  // padding rows: the fresh model's
        std::copy(fresh.at(name).begin() + 10 * 8, fresh.at(name).end(), want.begin() + 10 * 8);
      EXPECT_EQ(back->at(name), want) << name;
    }
  }
}

TEST(LlamaInterop, TiedExportGivesAnUntiedModelTheEmbeddingAsItsHead) {
  const LlamaWeights w = KnownWeights(/*tied=*/true);
  const ::lockstep::testing::TempDir tmp;
  ExportOptions o;
  o.format = "hf";
  o.out = tmp.path() + "/hf";
  ASSERT_TRUE(ExportWeights(w, o).ok());
  Result<parallel::CanonicalTensors> untied = LoadInitWeights("hf:" + o.out, TinyConfig(false));
  ASSERT_TRUE(untied.ok()) << untied.status().ToString();
  const std::vector<float>& head = untied->at("lm_head.weight");
  const std::vector<float>& embed = w.tensors.at("embed_tokens.weight");
  EXPECT_TRUE(std::equal(head.begin(), head.begin() + 80, embed.begin()));
  // Untied weights cannot become tied: one of the two matrices would be lost.
  ExportOptions o2 = o;
  o2.out = tmp.path() + "/untied";
  ASSERT_TRUE(ExportWeights(KnownWeights(false), o2).ok());
  Result<parallel::CanonicalTensors> tied = LoadInitWeights("hf:" + o2.out, TinyConfig(true));
  ASSERT_FALSE(tied.ok());
  EXPECT_NE(tied.status().message().find("untied"), std::string::npos) << tied.status().message();
}

nlohmann::json BaseHfConfig() {
  return {{"model_type", "llama"},
          {"vocab_size", 10},
          {"hidden_size", 8},
          {"intermediate_size", 12},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"max_position_embeddings", 4}};
}

TEST(LlamaInterop, ConfigJsonInBothRotarySpellings) {
  // transformers 4.x: rope_theta beside rope_scaling, its type under "rope_type" or "type".
  for (const char* type_key : {"rope_type", "type"}) {
    nlohmann::json j = BaseHfConfig();
    j["rope_theta"] = 500000.0;
    j["rope_scaling"] = {{type_key, "llama3"},
                         {"factor", 32.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8192}};
    Result<nn::LlamaConfig> c = LlamaConfigFromHf(j, "config.json");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->rope_theta, 500000.0);
    EXPECT_EQ(c->rope_scaling.type, "llama3");
    EXPECT_EQ(c->rope_scaling.factor, 32.0);
    EXPECT_EQ(c->rope_scaling.original_context, 8192);
    EXPECT_EQ(c->kv_heads, 1);
    EXPECT_EQ(c->norm_eps, 1e-6) << "transformers' LlamaConfig default";
  }
  // transformers 5.x: rope_parameters holds the theta too.
  nlohmann::json j = BaseHfConfig();
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 100000.0}};
  Result<nn::LlamaConfig> c = LlamaConfigFromHf(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_theta, 100000.0);
  EXPECT_EQ(c->rope_scaling.type, "none");
  // And lockstep's own export reads back as the model it came from, llama3 scaling included.
  nn::LlamaConfig mine = TinyConfig(false);
  mine.rope_theta = 500000.0;
  mine.rope_scaling.type = "llama3";
  mine.rope_scaling.factor = 16.0;
  Result<nn::LlamaConfig> back = LlamaConfigFromHf(LlamaHfConfigJson(mine, StDType::kBF16), "config.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(SameLlamaArchitecture(*back, mine, "back").ok());
  EXPECT_EQ(back->rope_scaling.factor, 16.0);
  Result<nn::LlamaConfig> manifest = LlamaConfigFromJson(LlamaConfigToJson(mine), "manifest");
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_TRUE(SameLlamaArchitecture(*manifest, mine, "manifest").ok());
  EXPECT_EQ(manifest->context, mine.context);
  EXPECT_EQ(manifest->vocab_pad, mine.vocab_pad);
}

TEST(LlamaInterop, WhatItCannotRepresentIsOneLineNamingTheKey) {
  const struct {
    const char* key;
    nlohmann::json value;
    const char* needle;
  } cases[] = {
      {"model_type", "mistral", "model_type \"mistral\""},
      {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}, "rope_scaling type \"yarn\""},
      {"rope_parameters", {{"rope_type", "linear"}, {"factor", 2.0}}, "rope_parameters type \"linear\""},
      {"attention_bias", true, "attention_bias"},
      {"mlp_bias", true, "mlp_bias"},
      {"hidden_act", "gelu", "hidden_act \"gelu\""},
      {"num_key_value_heads", 3, "model.kv_heads"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = BaseHfConfig();
    j[c.key] = c.value;
    Result<nn::LlamaConfig> r = LlamaConfigFromHf(j, "x/config.json");
    ASSERT_FALSE(r.ok()) << c.key;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
  nlohmann::json qwen = BaseHfConfig();
  qwen["model_type"] = "qwen2";
  qwen["architectures"] = {"Qwen2ForCausalLM"};
  Result<nn::LlamaConfig> r = LlamaConfigFromHf(qwen, "x/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Qwen2ForCausalLM"), std::string::npos) << r.status().message();
}

TEST(LlamaInterop, DifferentShapeOrRotaryIsRefusedAnyContextLoads) {
  const LlamaWeights w = KnownWeights(false);
  const ::lockstep::testing::TempDir tmp;
  ExportOptions o;
  o.format = "hf";
  o.out = tmp.path() + "/hf";
  ASSERT_TRUE(ExportWeights(w, o).ok());
  nn::LlamaConfig longer = TinyConfig(false);
  longer.context = 64;  // rotary positions are not weights: fine-tuning at another context
  EXPECT_TRUE(LoadInitWeights("hf:" + o.out, longer).ok());
  nn::LlamaConfig theta = TinyConfig(false);
  theta.rope_theta = 500000.0;
  Result<parallel::CanonicalTensors> r = LoadInitWeights("hf:" + o.out, theta);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.rope_theta"), std::string::npos) << r.status().message();
  nn::LlamaConfig kv = TinyConfig(false);
  kv.kv_heads = 2;
  r = LoadInitWeights("hf:" + o.out, kv);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.kv_heads"), std::string::npos) << r.status().message();
  r = LoadInitWeights("llmc:" + o.out, TinyConfig(false));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("llm.c"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace lockstep::interop
