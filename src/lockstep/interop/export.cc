#include "lockstep/interop/export.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "lockstep/interop/gpt_weights.h"
#include "lockstep/interop/hf_format.h"
#include "lockstep/interop/llama_hf.h"
#include "lockstep/interop/llama_weights.h"
#include "lockstep/interop/llmc_format.h"
#include "lockstep/interop/safetensors_io.h"
#include "lockstep/checkpoint/reader.h"
#include "lockstep/checkpoint/resolve.h"
#include "lockstep/text/tokenizer.h"

namespace lockstep::interop {
namespace {

namespace fs = std::filesystem;

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return Status::IoError("cannot write " + path);
  return Status::Ok();
}

std::string Padded5(int n) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%05d", n);
  return buf;
}

// HF's layout: model.safetensors, or model-0000k-of-0000K.safetensors shards (in state-dict
// order, a new shard when the next tensor would pass max_bytes) with model.safetensors.index.json.
Status WriteHf(const std::vector<HfTensor>& hf, const nlohmann::json& config, const std::string& dir, StDType dtype,
               int64_t max_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument("--out " + dir + ": cannot create the directory: " + ec.message());
  std::vector<std::vector<StTensorOut>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (const HfTensor& t : hf) {
    StTensorOut o{t.name, t.shape, t.values.data()};
    const int64_t bytes = SafetensorsDataBytes({o}, dtype);
    if (in_shard > 0 && in_shard + bytes > max_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(o);
    in_shard += bytes;
    total += bytes;
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const int k = static_cast<int>(shards.size());
  nlohmann::json weight_map = nlohmann::json::object();
  for (int i = 0; i < k; ++i) {
    const std::string name =
        k == 1 ? "model.safetensors" : "model-" + Padded5(i + 1) + "-of-" + Padded5(k) + ".safetensors";
    LS_RETURN_IF_ERROR(WriteSafetensors(dir + "/" + name, shards[i], dtype, metadata));
    for (const StTensorOut& t : shards[i]) weight_map[t.name] = name;
    std::printf("wrote %s/%s (%zu tensors)\n", dir.c_str(), name.c_str(), shards[i].size());
  }
  if (k > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    LS_RETURN_IF_ERROR(WriteText(dir + "/model.safetensors.index.json", index.dump(2) + "\n"));
    std::printf("wrote %s/model.safetensors.index.json\n", dir.c_str());
  }
  LS_RETURN_IF_ERROR(WriteText(dir + "/config.json", config.dump(2) + "\n"));
  std::printf("wrote %s/config.json\n", dir.c_str());
  return Status::Ok();
}

struct HfDir {
  nlohmann::json config;
  std::map<std::string, StTensorIn> tensors;
};

// config.json and the tensors of model.safetensors, or of the shards an index names.
Result<HfDir> ReadHfDir(const std::string& spec, const std::string& path) {
  HfDir d;
  std::ifstream cfg(path + "/config.json");
  if (!cfg) return Status::NotFound("--init-from " + spec + ": no " + path + "/config.json");
  d.config = nlohmann::json::parse(cfg, nullptr, false);
  if (d.config.is_discarded()) return Status::InvalidArgument(path + "/config.json is not valid JSON");
  std::vector<std::string> files;
  if (std::ifstream index(path + "/model.safetensors.index.json"); index) {
    const nlohmann::json j = nlohmann::json::parse(index, nullptr, false);
    if (j.is_discarded() || !j.contains("weight_map"))
      return Status::InvalidArgument(path + "/model.safetensors.index.json has no weight_map");
    std::set<std::string> unique;
    for (const auto& [name, file] : j["weight_map"].items()) unique.insert(file.get<std::string>());
    files.assign(unique.begin(), unique.end());
  } else {
    files.push_back("model.safetensors");
  }
  for (const std::string& f : files) {
    LS_ASSIGN_OR_RETURN(auto part, ReadSafetensors(path + "/" + f));
    d.tensors.merge(part);
  }
  return d;
}

struct InitSpec {
  std::string kind, path;
};

Result<InitSpec> ParseInitSpec(const std::string& spec) {
  const size_t colon = spec.find(':');
  InitSpec s;
  s.kind = colon == std::string::npos ? "" : spec.substr(0, colon);
  s.path = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (s.path.empty() || (s.kind != "hf" && s.kind != "llmc" && s.kind != "lockstep"))
    return Status::InvalidArgument("--init-from: expected hf:DIR, llmc:FILE or lockstep:CHECKPOINT, got \"" + spec +
                                   "\"");
  return s;
}

// The fresh model's tensors: what rows a source lacks start from.
parallel::CanonicalTensors Fresh(const nn::GptConfig& c) {
  nn::Gpt gpt(c, nn::Gpt::InferenceOnly{});
  parallel::CanonicalTensors t;
  for (const nn::ParamInfo& p : gpt.params())
    t[p.name].assign(gpt.params().flat_params() + p.offset, gpt.params().flat_params() + p.offset + p.numel);
  return t;
}

Status SameArchitecture(const nn::GptConfig& src, const nn::GptConfig& dst, const std::string& where) {
  auto differ = [&](const char* key, int64_t a, int64_t b) {
    return Status::InvalidArgument(where + ": " + key + " is " + std::to_string(a) + ", the config's is " +
                                   std::to_string(b));
  };
  if (src.vocab != dst.vocab) return differ("model.vocab", src.vocab, dst.vocab);
  if (src.context != dst.context) return differ("model.context", src.context, dst.context);
  if (src.layers != dst.layers) return differ("model.layers", src.layers, dst.layers);
  if (src.heads != dst.heads) return differ("model.heads", src.heads, dst.heads);
  if (src.width != dst.width) return differ("model.width", src.width, dst.width);
  if (src.mlp_ratio != dst.mlp_ratio) return differ("model.mlp_ratio", src.mlp_ratio, dst.mlp_ratio);
  if (dst.tie_embeddings && !src.tie_embeddings)
    return Status::InvalidArgument(where + ": the model is untied, the config ties it (model.tie_embeddings)");
  return Status::Ok();
}

// Lockstep / llm.c weights onto the target config: real-vocabulary rows always, padding rows
// when both pad alike, an untied target's head from wte when the source is tied.
parallel::CanonicalTensors Adapt(const GptWeights& src, const nn::GptConfig& dst) {
  parallel::CanonicalTensors out = Fresh(dst);
  const int64_t keep_rows = src.config.padded_vocab() == dst.padded_vocab() ? dst.padded_vocab() : dst.vocab;
  for (auto& [name, values] : out) {
    std::string from = name;
    if (name == "head.weight" && src.config.tie_embeddings) from = "wte.weight";
    const std::vector<float>& s = src.tensors.at(from);
    const bool vocab_rows = name == "wte.weight" || name == "head.weight";
    const size_t n = vocab_rows ? static_cast<size_t>(keep_rows * dst.width) : values.size();
    std::copy(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n), values.begin());
  }
  return out;
}

}  // namespace

Result<std::optional<CheckpointTokenizer>> ReadCheckpointTokenizer(const std::string& path) {
  LS_ASSIGN_OR_RETURN(const std::string dir, checkpoint::ResolveCheckpointPath(path));
  LS_ASSIGN_OR_RETURN(checkpoint::Checkpoint ckpt, checkpoint::Checkpoint::Open(dir));
  auto it = ckpt.extra().find("tokenizer");
  if (it == ckpt.extra().end()) return std::optional<CheckpointTokenizer>();
  LS_ASSIGN_OR_RETURN(text::Tokenizer t, text::Tokenizer::FromJson(*it, dir + "/manifest.json: extra.tokenizer"));
  return std::optional<CheckpointTokenizer>(CheckpointTokenizer{*it, std::move(t)});
}

namespace {

// The run's tokenizer beside a Hugging Face export: tokenizer.json as it was, and a
// tokenizer_config.json naming the generic fast tokenizer class (a model-specific class such as
// LlamaTokenizerFast would add a BOS token the run never saw) with its end-of-text token and
// the model's context.
Status WriteHfTokenizer(const std::string& checkpoint_path, int64_t context, const std::string& dir) {
  LS_ASSIGN_OR_RETURN(std::optional<CheckpointTokenizer> saved, ReadCheckpointTokenizer(checkpoint_path));
  if (!saved) return Status::Ok();
  const text::Tokenizer& t = saved->tokenizer;
  LS_RETURN_IF_ERROR(WriteText(dir + "/tokenizer.json", saved->json.dump(2) + "\n"));
  std::printf("wrote %s/tokenizer.json (vocabulary %d)\n", dir.c_str(), t.vocab_size());
  nlohmann::json cfg = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                        {"clean_up_tokenization_spaces", false},
                        {"model_max_length", context}};
  if (t.end_of_text()) cfg["eos_token"] = t.IdToToken(*t.end_of_text());
  LS_RETURN_IF_ERROR(WriteText(dir + "/tokenizer_config.json", cfg.dump(2) + "\n"));
  std::printf("wrote %s/tokenizer_config.json\n", dir.c_str());
  return Status::Ok();
}

}  // namespace

Status RunExport(const ExportOptions& o) {
  if (o.config_path.empty()) {
    LS_ASSIGN_OR_RETURN(const std::string kind, CheckpointModelKind(o.checkpoint));
    if (kind == "llama") {
      LS_ASSIGN_OR_RETURN(LlamaWeights w, LoadLlamaCheckpoint(o.checkpoint));
      LS_RETURN_IF_ERROR(ExportWeights(w, o));
      return o.format == "hf" ? WriteHfTokenizer(o.checkpoint, w.config.context, o.out) : Status::Ok();
    }
  }
  LS_ASSIGN_OR_RETURN(GptWeights w, LoadGptCheckpoint(o.checkpoint, o.config_path, o.overrides));
  LS_RETURN_IF_ERROR(ExportWeights(w, o));
  return o.format == "hf" ? WriteHfTokenizer(o.checkpoint, w.config.context, o.out) : Status::Ok();
}

namespace {

Status CheckExportOptions(const ExportOptions& o) {
  if (o.format != "hf" && o.format != "llmc")
    return Status::InvalidArgument("--format: expected hf or llmc, got \"" + o.format + "\"");
  if (o.out.empty()) return Status::InvalidArgument("--out is required");
  return ParseStDType(o.dtype).status();
}

int64_t MaxShardBytes(const ExportOptions& o) { return o.max_shard_bytes > 0 ? o.max_shard_bytes : int64_t{5} << 30; }

}  // namespace

Status ExportWeights(const GptWeights& w, const ExportOptions& o) {
  LS_RETURN_IF_ERROR(CheckExportOptions(o));
  const StDType dtype = *ParseStDType(o.dtype);
  if (o.format == "llmc") {
    LS_RETURN_IF_ERROR(WriteLlmcModel(o.out, w, dtype));
    std::printf("wrote %s (llm.c GPT-2 model, version %d, %lld parameters)\n", o.out.c_str(),
                dtype == StDType::kF32 ? 3 : 5, static_cast<long long>(nn::GptParamCount(w.config)));
    return Status::Ok();
  }
  return WriteHf(ToHf(w), HfConfigJson(w.config, dtype), o.out, dtype, MaxShardBytes(o));
}

Status ExportWeights(const LlamaWeights& w, const ExportOptions& o) {
  LS_RETURN_IF_ERROR(CheckExportOptions(o));
  if (o.format == "llmc")
    return Status::InvalidArgument("--format llmc: llm.c files hold GPT-2 models; " + w.source +
                                   " is a Llama (export it with --format hf)");
  const StDType dtype = *ParseStDType(o.dtype);
  return WriteHf(LlamaToHf(w), LlamaHfConfigJson(w.config, dtype), o.out, dtype, MaxShardBytes(o));
}

Result<parallel::CanonicalTensors> LoadInitWeights(const std::string& spec, const nn::GptConfig& target) {
  LS_ASSIGN_OR_RETURN(const InitSpec s, ParseInitSpec(spec));
  if (s.kind == "lockstep" || s.kind == "llmc") {
    LS_ASSIGN_OR_RETURN(GptWeights w, s.kind == "lockstep" ? LoadGptCheckpoint(s.path) : ReadLlmcModel(s.path));
    LS_RETURN_IF_ERROR(SameArchitecture(w.config, target, "--init-from " + spec));
    return Adapt(w, target);
  }
  LS_ASSIGN_OR_RETURN(HfDir hf, ReadHfDir(spec, s.path));
  LS_ASSIGN_OR_RETURN(nn::GptConfig src, GptConfigFromHf(hf.config, s.path + "/config.json"));
  LS_RETURN_IF_ERROR(SameArchitecture(src, target, "--init-from " + spec));
  // A tied export has no lm_head.weight; some writers store it anyway (equal to wte).
  const bool hf_tied = src.tie_embeddings || hf.tensors.count("lm_head.weight") == 0;
  return FromHf(target, hf.tensors, hf_tied, Fresh(target), "--init-from " + spec);
}

Result<parallel::CanonicalTensors> LoadInitWeights(const std::string& spec, const nn::LlamaConfig& target) {
  LS_ASSIGN_OR_RETURN(const InitSpec s, ParseInitSpec(spec));
  const std::string where = "--init-from " + spec;
  if (s.kind == "llmc")
    return Status::InvalidArgument(where + ": llm.c files hold GPT-2 models; a Llama starts from hf: or lockstep:");
  if (s.kind == "lockstep") {
    LS_ASSIGN_OR_RETURN(LlamaWeights w, LoadLlamaCheckpoint(s.path));
    LS_RETURN_IF_ERROR(SameLlamaArchitecture(w.config, target, where));
    // Real-vocabulary rows always, padding rows when both pad alike, an untied target's head
    // from the embedding when the source is tied.
    parallel::CanonicalTensors out = FreshLlama(target);
    const int64_t keep_rows =
        w.config.padded_vocab() == target.padded_vocab() ? target.padded_vocab() : target.vocab;
    for (auto& [name, values] : out) {
      const bool vocab_rows = name == "embed_tokens.weight" || name == "lm_head.weight";
      const std::string from = name == "lm_head.weight" && w.config.tie_embeddings ? "embed_tokens.weight" : name;
      const std::vector<float>& src = w.tensors.at(from);
      const size_t n = vocab_rows ? static_cast<size_t>(keep_rows * target.width) : values.size();
      std::copy(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n), values.begin());
    }
    return out;
  }
  LS_ASSIGN_OR_RETURN(HfDir hf, ReadHfDir(spec, s.path));
  LS_ASSIGN_OR_RETURN(nn::LlamaConfig src, LlamaConfigFromHf(hf.config, s.path + "/config.json"));
  LS_RETURN_IF_ERROR(SameLlamaArchitecture(src, target, where));
  const bool hf_tied = src.tie_embeddings || hf.tensors.count("lm_head.weight") == 0;
  return LlamaFromHf(target, hf.tensors, hf_tied, FreshLlama(target), where);
}

}  // namespace lockstep::interop
