// A GPT's weights outside a training run: the model description a checkpoint carries (the
// manifest's extra.model, written by every training run) and the canonical tensors (full,
// by lockstep name, fp32) read from a lockstep checkpoint of any layout. `export`, `sample` and
// `train --init-from` start here.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/core/result.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/parallel/canonical.h"

namespace lockstep::interop {

// {"kind":"gpt","vocab":..,"vocab_pad":..,"tie_embeddings":..,"context":..,"layers":..,
//  "heads":..,"width":..,"mlp_ratio":..}
nlohmann::json GptConfigToJson(const nn::GptConfig& c);
// `where` names the source in errors; the result is validated.
Result<nn::GptConfig> GptConfigFromJson(const nlohmann::json& j, const std::string& where);

struct GptWeights {
  nn::GptConfig config;
  parallel::CanonicalTensors tensors;  // "wte.weight", "blocks.0.qkv.weight", ... (no "model.")
  std::string source;                  // the checkpoint directory (messages)
};

// Reads every model tensor of a lockstep checkpoint (any of the four ways to name one,
// checkpoint/resolve.h), verifying checksums. The model comes from the manifest, or from
// `config_path` (a TOML config's [model], with `overrides`) for checkpoints written before
// the manifest carried it. Bad input is one line: InvalidArgument / NotFound.
Result<GptWeights> LoadGptCheckpoint(const std::string& path, const std::string& config_path = "",
                                     const std::vector<std::string>& overrides = {});

// Copies the weights into a whole nn::Gpt of the same config.
void CopyInto(const GptWeights& w, nn::Gpt* gpt);

}  // namespace lockstep::interop
