// Hugging Face transformers' GPT2LMHeadModel layout (docs/interop.md): config.json and the
// tensor names, shapes and transposes of its state dict, to and from lockstep's GPT.
//
//   lockstep                      HF                                       HF shape
//   wte.weight [Vp, C]            transformer.wte.weight                   [V, C] (padding rows dropped)
//   wpe.weight                    transformer.wpe.weight                   [T, C]
//   blocks.i.ln1.{weight,bias}    transformer.h.i.ln_1.{weight,bias}       [C]
//   blocks.i.qkv.weight [3C, C]   transformer.h.i.attn.c_attn.weight       [C, 3C] (Conv1D: transposed)
//   blocks.i.qkv.bias             transformer.h.i.attn.c_attn.bias         [3C]
//   blocks.i.proj.weight [C, C]   transformer.h.i.attn.c_proj.weight       [C, C]  (transposed)
//   blocks.i.proj.bias            transformer.h.i.attn.c_proj.bias         [C]
//   blocks.i.ln2.{weight,bias}    transformer.h.i.ln_2.{weight,bias}       [C]
//   blocks.i.fc.weight [4C, C]    transformer.h.i.mlp.c_fc.weight          [C, 4C] (transposed)
//   blocks.i.fc.bias              transformer.h.i.mlp.c_fc.bias            [4C]
//   blocks.i.fc2.weight [C, 4C]   transformer.h.i.mlp.c_proj.weight        [4C, C] (transposed)
//   blocks.i.fc2.bias             transformer.h.i.mlp.c_proj.bias          [C]
//   lnf.{weight,bias}             transformer.ln_f.{weight,bias}           [C]
//   head.weight [Vp, C]           lm_head.weight (untied models only)      [V, C]
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/interop/gpt_weights.h"
#include "lockstep/interop/safetensors_io.h"

namespace lockstep::interop {

struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// In HF's state-dict order.
std::vector<HfTensor> ToHf(const GptWeights& w);

// config.json of GPT2LMHeadModel for `c` (torch_dtype names the exported dtype).
nlohmann::json HfConfigJson(const nn::GptConfig& c, StDType dtype);
// The lockstep model a config.json describes (vocab_pad 1; a GPT-2 activation and eps only).
Result<nn::GptConfig> GptConfigFromHf(const nlohmann::json& config, const std::string& where);

// The lockstep tensors of `target` from HF tensors (each checked: present, shape). Rows of
// wte/head beyond the HF vocabulary (padding) keep the values in `fresh`, which must hold
// every tensor of `target` (its initialisation). A tied HF model gives an untied target a head
// equal to wte; an untied one cannot become tied (InvalidArgument).
Result<parallel::CanonicalTensors> FromHf(const nn::GptConfig& target, const std::map<std::string, StTensorIn>& hf,
                                          bool hf_tied, parallel::CanonicalTensors fresh, const std::string& where);

}  // namespace lockstep::interop
