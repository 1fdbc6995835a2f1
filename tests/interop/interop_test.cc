// Export and import of GPT weights (runtime/interop): a hand-built tiny GPT-2 with known values
// exported to Hugging Face files and read back by a safetensors reader written here, from the
// format's definition (8-byte length, JSON header, data), checking every name, shape, dtype,
// offset and the Conv1D transposes; llm.c's file checked the same way; and the round trips
// lockstep -> hf -> lockstep and lockstep -> llmc -> lockstep giving back the same bits.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "lockstep/interop/export.h"
#include "lockstep/interop/gpt_weights.h"
#include "interop/safetensors_reader.h"
#include "temp_dir.h"

namespace lockstep::interop {
namespace {

// A value no two elements of the model share: tensor number * 1000 + element index.
GptWeights KnownWeights(bool tied) {
  GptWeights w;
  w.config = nn::GptConfig{10, 4, 2, 2, 4, 4, 7, 8, tied};  // vocab 10 padded to 16 rows
  w.source = "test";
  nn::Gpt probe(w.config, nn::Gpt::InferenceOnly{});
  int k = 1;
  for (const nn::ParamInfo& p : probe.params()) {
    std::vector<float>& v = w.tensors[p.name];
    for (int64_t i = 0; i < p.numel; ++i) v.push_back(static_cast<float>(k * 1000 + i));
    ++k;
  }
  return w;
}

TEST(Interop, HfExportHasHfNamesShapesAndTransposes) {
  for (bool tied : {true, false}) {
    const GptWeights w = KnownWeights(tied);
    const int64_t C = 4, V = 10, L = 2;
    const ::lockstep::testing::TempDir tmp;
    const std::string& dir = tmp.path();
    ExportOptions o;
    o.format = "hf";
    o.out = dir + "/hf";
    ASSERT_TRUE(ExportWeights(w, o).ok());
    nlohmann::json meta;
    auto t = ReadSafetensorsIndependently(o.out + "/model.safetensors", &meta);
    EXPECT_EQ(meta, nlohmann::json({{"format", "pt"}}));
    // Every name HF's GPT2LMHeadModel has, with its shape; nothing else.
    std::map<std::string, std::vector<int64_t>> expect = {{"transformer.wte.weight", {V, C}},
                                                          {"transformer.wpe.weight", {4, C}},
                                                          {"transformer.ln_f.weight", {C}},
                                                          {"transformer.ln_f.bias", {C}}};
    for (int l = 0; l < L; ++l) {
      const std::string h = "transformer.h." + std::to_string(l) + ".";
      for (const char* ln : {"ln_1", "ln_2"}) {
        expect[h + ln + ".weight"] = {C};
        expect[h + ln + ".bias"] = {C};
      }
      expect[h + "attn.c_attn.weight"] = {C, 3 * C};
      expect[h + "attn.c_attn.bias"] = {3 * C};
      expect[h + "attn.c_proj.weight"] = {C, C};
      expect[h + "attn.c_proj.bias"] = {C};
      expect[h + "mlp.c_fc.weight"] = {C, 4 * C};
      expect[h + "mlp.c_fc.bias"] = {4 * C};
      expect[h + "mlp.c_proj.weight"] = {4 * C, C};
      expect[h + "mlp.c_proj.bias"] = {C};
    }
    if (!tied) expect["lm_head.weight"] = {V, C};
    ASSERT_EQ(t.size(), expect.size()) << "tied " << tied;
    for (const auto& [name, shape] : expect) {
      ASSERT_TRUE(t.count(name)) << name;
      EXPECT_EQ(t[name].shape, shape) << name;
    }
    // Values of every exported tensor against this table, written here rather than taken from
    // the exporter's own name map (a swapped entry there would round-trip unnoticed):
    // HF name -> lockstep tensor, and how HF stores it. HF's Conv1D weights are [in, out]:
    // element (i, o) is lockstep's (o, i); wte and lm_head drop the padding rows.
    enum class Form { kSame, kTransposed, kFirstVRows };
    struct Entry {
      std::string ours;
      Form form;
    };
    std::map<std::string, Entry> table = {{"transformer.wte.weight", {"wte.weight", Form::kFirstVRows}},
                                          {"transformer.wpe.weight", {"wpe.weight", Form::kSame}},
                                          {"transformer.ln_f.weight", {"lnf.weight", Form::kSame}},
                                          {"transformer.ln_f.bias", {"lnf.bias", Form::kSame}}};
    if (!tied) table["lm_head.weight"] = {"head.weight", Form::kFirstVRows};
    for (int l = 0; l < L; ++l) {
      const std::string h = "transformer.h." + std::to_string(l) + ".", b = "blocks." + std::to_string(l) + ".";
      table[h + "ln_1.weight"] = {b + "ln1.weight", Form::kSame};
      table[h + "ln_1.bias"] = {b + "ln1.bias", Form::kSame};
      table[h + "ln_2.weight"] = {b + "ln2.weight", Form::kSame};
      table[h + "ln_2.bias"] = {b + "ln2.bias", Form::kSame};
      table[h + "attn.c_attn.weight"] = {b + "qkv.weight", Form::kTransposed};
      table[h + "attn.c_attn.bias"] = {b + "qkv.bias", Form::kSame};
      table[h + "attn.c_proj.weight"] = {b + "proj.weight", Form::kTransposed};
      table[h + "attn.c_proj.bias"] = {b + "proj.bias", Form::kSame};
      table[h + "mlp.c_fc.weight"] = {b + "fc.weight", Form::kTransposed};
      table[h + "mlp.c_fc.bias"] = {b + "fc.bias", Form::kSame};
      table[h + "mlp.c_proj.weight"] = {b + "fc2.weight", Form::kTransposed};
      table[h + "mlp.c_proj.bias"] = {b + "fc2.bias", Form::kSame};
    }
    ASSERT_EQ(table.size(), expect.size());
    for (const auto& [hf, e] : table) {
      ASSERT_TRUE(t.count(hf)) << hf;
      const std::vector<float>& src = w.tensors.at(e.ours);
      std::vector<float> want;
      if (e.form == Form::kSame) {
        want = src;
      } else if (e.form == Form::kFirstVRows) {
        want.assign(src.begin(), src.begin() + V * C);
      } else {
        const int64_t in = t[hf].shape[0], out = t[hf].shape[1];  // ours is [out, in]
        for (int64_t i = 0; i < in; ++i)
          for (int64_t o = 0; o < out; ++o) want.push_back(src[static_cast<size_t>(o * in + i)]);
      }
      EXPECT_EQ(t[hf].values, want) << hf << " should hold " << e.ours;
    }
    std::ifstream cfg(o.out + "/config.json");
    const nlohmann::json c = nlohmann::json::parse(cfg);
    EXPECT_EQ(c["model_type"], "gpt2");
    EXPECT_EQ(c["architectures"], nlohmann::json({"GPT2LMHeadModel"}));
    EXPECT_EQ(c["vocab_size"], V);
    EXPECT_EQ(c["n_positions"], 4);
    EXPECT_EQ(c["n_embd"], C);
    EXPECT_EQ(c["n_layer"], L);
    EXPECT_EQ(c["n_head"], 2);
    EXPECT_EQ(c["n_inner"], 4 * C);
    EXPECT_EQ(c["activation_function"], "gelu_new");
    EXPECT_EQ(c["layer_norm_epsilon"], 1e-5);
    EXPECT_EQ(c["tie_word_embeddings"], tied);
  }
}

TEST(Interop, ShardedHfExportHasAnIndex) {
  const GptWeights w = KnownWeights(true);
  const ::lockstep::testing::TempDir tmp;
  const std::string& dir = tmp.path();
  ExportOptions o;
  o.format = "hf";
  o.out = dir + "/hf";
  o.max_shard_bytes = 400;
  ASSERT_TRUE(ExportWeights(w, o).ok());
  std::ifstream index(o.out + "/model.safetensors.index.json");
  const nlohmann::json j = nlohmann::json::parse(index);
  std::set<std::string> files;
  for (const auto& [name, file] : j["weight_map"].items()) files.insert(file.get<std::string>());
  ASSERT_GT(files.size(), 1u);
  EXPECT_EQ(*files.begin(), "model-00001-of-" + std::string(files.size() < 10 ? "0000" : "000") +
                                std::to_string(files.size()) + ".safetensors");
  int64_t total = 0, tensors = 0;
  for (const std::string& f : files) {
    nlohmann::json meta;
    for (const auto& [name, r] : ReadSafetensorsIndependently(o.out + "/" + f, &meta)) {
      EXPECT_EQ(j["weight_map"][name], f);
      total += static_cast<int64_t>(r.values.size()) * 4;
      ++tensors;
    }
  }
  EXPECT_EQ(j["metadata"]["total_size"], total);
  EXPECT_EQ(tensors, 4 + 2 * 12);
  // And it loads back.
  auto back = LoadInitWeights("hf:" + o.out, w.config);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
}

TEST(Interop, LlmcFileIsLlmcsLayout) {
  const GptWeights w = KnownWeights(true);
  const ::lockstep::testing::TempDir tmp;
  const std::string& dir = tmp.path();
  ExportOptions o;
  o.format = "llmc";
  o.out = dir + "/model.bin";
  ASSERT_TRUE(ExportWeights(w, o).ok());
  const std::vector<char> bytes = ReadAll(o.out);
  int32_t h[8];
  std::memcpy(h, bytes.data(), sizeof(h));
  EXPECT_EQ(std::vector<int32_t>(h, h + 8), (std::vector<int32_t>{20240326, 3, 4, 10, 2, 2, 4, 16}));
  const float* p = reinterpret_cast<const float*>(bytes.data() + 1024);
  // llm.c's order: wte (Vp, C), wpe, then every layer's ln1w, then every layer's ln1b, ...
  size_t at = 0;
  auto expect = [&](const std::string& name) {
    const std::vector<float>& v = w.tensors.at(name);
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(p[at + i], v[i]) << name << " " << i;
    at += v.size();
  };
  expect("wte.weight");
  expect("wpe.weight");
  for (const char* s : {"ln1.weight", "ln1.bias", "qkv.weight", "qkv.bias", "proj.weight", "proj.bias", "ln2.weight",
                        "ln2.bias", "fc.weight", "fc.bias", "fc2.weight", "fc2.bias"})
    for (int l = 0; l < 2; ++l) expect("blocks." + std::to_string(l) + "." + s);
  expect("lnf.weight");
  expect("lnf.bias");
  EXPECT_EQ(1024 + at * 4, bytes.size());
  // An untied model has no llm.c form.
  o.out = dir + "/untied.bin";
  Status s = ExportWeights(KnownWeights(false), o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("untied"), std::string::npos);
}

// lockstep -> hf -> lockstep and lockstep -> llmc -> lockstep: the same bits (HF drops the
// padding rows, which come back as the model's initial values; llm.c keeps them).
TEST(Interop, RoundTripsGiveBackTheSameBits) {
  const GptWeights w = KnownWeights(true);
  const ::lockstep::testing::TempDir tmp;
  const std::string& dir = tmp.path();
  ExportOptions o;
  o.format = "hf";
  o.out = dir + "/hf";
  ASSERT_TRUE(ExportWeights(w, o).ok());
  o.format = "llmc";
  o.out = dir + "/model.bin";
  ASSERT_TRUE(ExportWeights(w, o).ok());
  auto llmc = LoadInitWeights("llmc:" + o.out, w.config);
  ASSERT_TRUE(llmc.ok()) << llmc.status().ToString();
  EXPECT_EQ(*llmc, w.tensors);
  auto hf = LoadInitWeights("hf:" + dir + "/hf", w.config);
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  nn::Gpt fresh(w.config, nn::Gpt::InferenceOnly{});
  const nn::ParamInfo& wte = fresh.params().info(0);
  for (const auto& [name, values] : w.tensors) {
    const std::vector<float>& got = hf->at(name);
    for (size_t i = 0; i < values.size(); ++i) {
      const bool padding = name == "wte.weight" && static_cast<int64_t>(i) >= 10 * 4;
      ASSERT_EQ(got[i], padding ? fresh.params().flat_params()[wte.offset + i] : values[i]) << name << " " << i;
    }
  }
  // A model of another shape is refused, naming the key.
  nn::GptConfig other = w.config;
  other.layers = 3;
  auto bad = LoadInitWeights("hf:" + dir + "/hf", other);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("model.layers is 2, the config's is 3"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(LoadInitWeights("hf:" + dir + "/none", w.config).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadInitWeights("tf:" + dir, w.config).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::interop
