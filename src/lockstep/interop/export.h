// `lockstep export` and `lockstep train --init-from`: a GPT's or a Llama's weights to and from Hugging Face
// (hf_format.h) and llm.c (llmc_format.h) files, and from another lockstep checkpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/nn/llama.h"
#include "lockstep/parallel/canonical.h"
#include "lockstep/text/tokenizer.h"

#include <nlohmann/json.hpp>

namespace lockstep::interop {

struct ExportOptions {
  std::string checkpoint;       // any of the four ways to name one
  std::string format;           // "hf" | "llmc"
  std::string out;              // hf: a directory; llmc: a file
  std::string dtype = "f32";    // "f32" | "bf16"
  int64_t max_shard_bytes = 0;  // hf: split model.safetensors above this (0: 5G, HF's default)
  std::string config_path;      // for checkpoints that do not describe their model
  std::vector<std::string> overrides;
};

// Writes the export and prints one line per file written.
Status RunExport(const ExportOptions& options);

// The tokenizer a checkpoint keeps (manifest extra "tokenizer", from data.tokenizer): its
// tokenizer.json as saved and the tokenizer read from it; nullopt when the run named none.
// `lockstep sample` encodes its prompt with it; an hf export writes it beside the weights.
struct CheckpointTokenizer {
  nlohmann::json json;
  text::Tokenizer tokenizer;
};
Result<std::optional<CheckpointTokenizer>> ReadCheckpointTokenizer(const std::string& path);

struct GptWeights;
struct LlamaWeights;
// The same for weights already in memory (options.checkpoint, config_path unused). A Llama
// exports to hf only.
Status ExportWeights(const GptWeights& w, const ExportOptions& options);
Status ExportWeights(const LlamaWeights& w, const ExportOptions& options);

// --init-from hf:DIR | llmc:FILE | lockstep:CHECKPOINT: the canonical tensors of `target`
// (full, by lockstep name), read from the source and checked against the model; rows the
// source lacks (vocabulary padding dropped by HF) keep target's initial values.
Result<parallel::CanonicalTensors> LoadInitWeights(const std::string& spec, const nn::GptConfig& target);
// A Llama's: hf:DIR or lockstep:CHECKPOINT (llm.c files are GPT-2s). The context may differ.
Result<parallel::CanonicalTensors> LoadInitWeights(const std::string& spec, const nn::LlamaConfig& target);

}  // namespace lockstep::interop
