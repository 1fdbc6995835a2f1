// Activation memory of one GPT stage, by layer kind, as lockstep's ops keep it for backward
// (docs/memory.md derives every term). The memory row prints it beside the measured peak, the
// --mem-limit preflight adds it to the model states, and `lockstep plan` predicts with it.
//
// For one micro-batch of b rows of s tokens, width h, a heads, tensor-parallel degree t, in fp32
// (e = 4 bytes per element), a block without recompute keeps
//   residual   2 sbh e          (its input, and the residual after attention)
//   layernorm  2 sbh e + 4 sb e (two LayerNorm outputs, their mean and 1/std)
//   attention  (4/t + p) sbh e + (a/t) s^2 b e   (q,k,v, the attention output, the projection's
//                                                  output; the causal probabilities, all s x s)
//   mlp        (8/t + p) sbh e  (fc output, GELU output, fc2's output)
// where p = 1 when the output projections run sliced (t > 1, or deterministic mode's canonical
// slices: their output is kept apart from the residual) and 0 otherwise (the projection adds into
// the residual, nn::LinearResidualForward). So sbh (64 + 4as/h + 16/h) bytes at t = 1 (72 in
// deterministic mode), against Korthikanti et al.'s sbh(34 + 5as/h) for fp16 with dropout masks.
// With recompute = block a block keeps only its input (sbh e) and one block's worth is alive
// again while its backward runs.
#pragma once

#include <cstdint>

#include "lockstep/parallel/gpt_shard.h"

namespace lockstep::parallel {

struct ActivationBytes {
  int64_t embedding = 0;  // token and position embeddings (first stage)
  int64_t residual = 0;
  int64_t layernorm = 0;
  int64_t attention = 0;
  int64_t mlp = 0;
  int64_t head = 0;       // final LayerNorm, logits and the loss gradient buffer (last stage)
  int64_t recompute = 0;  // recompute = block: the one block recomputed during backward
  int64_t total() const { return embedding + residual + layernorm + attention + mlp + head + recompute; }
};

// One micro-batch of `rows` x `seq` tokens through the stage `o` split `tp` ways (`deterministic`:
// the run's --deterministic, whose canonical slices keep the projections' outputs at any tp).
ActivationBytes EstimateGptActivations(const GptShardOptions& o, int tp, int64_t rows, int64_t seq,
                                       bool deterministic);

}  // namespace lockstep::parallel
