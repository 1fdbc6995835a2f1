// Hugging Face transformers' LlamaForCausalLM layout (docs/interop.md): config.json and the
// state dict, to and from lockstep's Llama. The tensors map one to one: lockstep's names are
// HF's without "model." (lm_head.weight is the same in both), nn.Linear's [out, in] layout is
// lockstep's, and both rotate with rotate_half, so q_proj and k_proj need no permutation.
// embed_tokens and lm_head drop (export) or keep (import) the vocabulary padding rows.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/interop/hf_format.h"
#include "lockstep/interop/llama_weights.h"

namespace lockstep::interop {

// In HF's state-dict order.
std::vector<HfTensor> LlamaToHf(const LlamaWeights& w);

// config.json of LlamaForCausalLM for `c` (max_position_embeddings = model.context).
nlohmann::json LlamaHfConfigJson(const nn::LlamaConfig& c, StDType dtype);
// The lockstep model a config.json describes: model_type llama, hidden_act silu, no biases,
// rope_theta with rope_scaling (either of its keys "type"/"rope_type") or rope_parameters;
// anything else is one line naming the key. vocab_pad 1, context max_position_embeddings.
Result<nn::LlamaConfig> LlamaConfigFromHf(const nlohmann::json& config, const std::string& where);

// The lockstep tensors of `target` from HF tensors (each checked: present, shape); padding
// rows keep `fresh`'s values. A tied HF model gives an untied target a head equal to
// embed_tokens; an untied one cannot become tied.
Result<parallel::CanonicalTensors> LlamaFromHf(const nn::LlamaConfig& target,
                                               const std::map<std::string, StTensorIn>& hf, bool hf_tied,
                                               parallel::CanonicalTensors fresh, const std::string& where);

}  // namespace lockstep::interop
