// Rotary position embedding (RoPE) as transformers' Llama applies it, and the grouped-query
// packing of q, k and v that the attention kernel reads (nn/attention.h's packed layout):
//   inv_freq[i] = 1 / theta^(2i/d)              (i < d/2; llama3 scaling adjusts it, below)
//   angle[t][i] = t * inv_freq[i]; cos, sin = cos(angle), sin(angle) of shape [T, d/2]
//   per head: y = x * cat(cos, cos) + rotate_half(x) * cat(sin, sin), rotate_half(x) = cat(-x2, x1)
// so element i pairs with element i + d/2 (not 2i with 2i+1, the interleaved convention),
// which is why Hugging Face weights load as they are. Query head h reads key/value head
// h / (heads / kv_heads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/autograd/tape.h"
#include "lockstep/core/result.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

// rope_scaling = "llama3" (Llama 3.1): frequencies whose wavelength exceeds
// original_context / low_freq_factor are divided by factor, those below original_context /
// high_freq_factor kept, and the band between blended (transformers' _compute_llama3_parameters).
struct RopeScaling {
  std::string type = "none";  // "none" | "llama3"
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_context = 8192;
};

struct RotaryTables {
  int64_t positions = 0, half = 0;  // [positions, half] each
  std::vector<float> cos, sin;
};

// The tables for head dimension d (even) at positions 0..positions-1, in fp32 as transformers
// computes them.
RotaryTables MakeRotaryTables(int64_t d, int64_t positions, double theta, const RopeScaling& scaling);

// q: [B, T, heads*d], k and v: [B, T, kv_heads*d] -> packed [B, T, 3*heads*d] (q|k|v, k and v
// repeated over their query heads), q and k rotated by `tables` (positions >= T).
Variable PackRotaryQkvForward(Tape& tape, const Variable& q, const Variable& k, const Variable& v, int64_t heads,
                              int64_t kv_heads, const RotaryTables& tables);

}  // namespace lockstep::nn
