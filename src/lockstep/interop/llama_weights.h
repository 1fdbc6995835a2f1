// A Llama's weights outside a training run (the twin of gpt_weights.h): the model description
// its checkpoints carry (extra.model with kind "llama") and the canonical tensors read from a
// lockstep checkpoint of any layout. `export` and `train --init-from` start here.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/core/result.h"
#include "lockstep/nn/llama.h"
#include "lockstep/parallel/canonical.h"

namespace lockstep::interop {

// {"kind":"llama","vocab":..,"vocab_pad":..,"tie_embeddings":..,"context":..,"layers":..,
//  "heads":..,"kv_heads":..,"width":..,"ffn_hidden":..,"head_dim":..,"rope_theta":..,
//  "norm_eps":..,"rope_scaling":{"type":..,"factor":..,...}}
nlohmann::json LlamaConfigToJson(const nn::LlamaConfig& c);
// `where` names the source in errors; the result is validated.
Result<nn::LlamaConfig> LlamaConfigFromJson(const nlohmann::json& j, const std::string& where);

struct LlamaWeights {
  nn::LlamaConfig config;
  parallel::CanonicalTensors tensors;  // "embed_tokens.weight", "layers.0.self_attn.q_proj.weight", ...
  std::string source;                  // the checkpoint directory (messages)
};

// Reads every model tensor of a lockstep checkpoint whose manifest describes a Llama,
// verifying checksums. Bad input is one line: InvalidArgument / NotFound.
Result<LlamaWeights> LoadLlamaCheckpoint(const std::string& path);

// "gpt", "llama", ... as the checkpoint's manifest (extra.model.kind) says; "" when it does not
// describe its model (written before lockstep 0.7: a GPT).
Result<std::string> CheckpointModelKind(const std::string& path);

// The tensors of a fresh `c` (its initialisation): what rows a source lacks start from.
parallel::CanonicalTensors FreshLlama(const nn::LlamaConfig& c);

// One line naming the first key in which `src` and `dst` differ (shapes, rotary, eps, tying;
// not the context: rotary positions are not weights, so any context loads any other).
Status SameLlamaArchitecture(const nn::LlamaConfig& src, const nn::LlamaConfig& dst, const std::string& where);

}  // namespace lockstep::interop
