// llm.c's GPT-2 model file, as train_gpt2.c's gpt2_build_from_checkpoint reads it
// (docs/interop.md): a header of 256 int32 — [0] magic 20240326, [1] version (3: fp32
// parameters, 5: bf16), [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp — then the parameters in
// llm.c's order, each layer-stacked and in [out, in] layout (lockstep's own):
//   wte (Vp, C)  wpe (maxT, C)  ln1w (L, C)  ln1b (L, C)  qkvw (L, 3C, C)  qkvb (L, 3C)
//   attprojw (L, C, C)  attprojb (L, C)  ln2w (L, C)  ln2b (L, C)  fcw (L, 4C, C)  fcb (L, 4C)
//   fcprojw (L, C, 4C)  fcprojb (L, C)  lnfw (C)  lnfb (C)
// The head is wte (llm.c's GPT-2 is always tied) and the MLP is 4C wide.
#pragma once

#include <string>

#include "lockstep/interop/gpt_weights.h"
#include "lockstep/interop/safetensors_io.h"

namespace lockstep::interop {

inline constexpr int32_t kLlmcModelMagic = 20240326;

// InvalidArgument for a model llm.c cannot hold (untied, MLP not 4x).
Status WriteLlmcModel(const std::string& path, const GptWeights& w, StDType dtype);

// The model's tensors (every element, padding rows included) and the config the header gives
// (vocab_pad: 64 when that rounds V to Vp, else Vp itself; tied; MLP 4x).
Result<GptWeights> ReadLlmcModel(const std::string& path);

}  // namespace lockstep::interop
