// Causal multi-head self-attention, as the PyTorch peer's Block computes it:
//   q, k, v = qkv(x).split(C)            (qkv: Linear C -> 3C with bias)
//   head h uses columns h*C/H .. (h+1)*C/H of each of q, k, v
//   y = proj(softmax(q k^T / sqrt(C/H) + causal mask) v)   (proj: Linear C -> C with bias)
// q, k and v are never copied out: the kernel reads them in place from the packed
// [B, T, 3C] projection.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/autograd/tape.h"
#include "lockstep/nn/linear.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

// qkv: [B, T, 3C] packed q|k|v. Returns [B, T, C] (heads concatenated). Saves the softmax
// probabilities [B, H, T, T] for backward.
Variable AttentionForward(Tape& tape, const Variable& qkv, int64_t heads);
void AttentionBackward(const Variable& out, const Variable& qkv, const tensor::Tensor& att, int64_t heads);

class CausalSelfAttention {
 public:
  CausalSelfAttention() = default;
  // Registers "<prefix>.qkv.{weight,bias}" and "<prefix>.proj.{weight,bias}"; weights
  // N(0, std) and N(0, proj_std), biases zero.
  CausalSelfAttention(ParameterStore& ps, const std::string& prefix, int64_t width, int64_t heads, float std,
                      float proj_std);

  // x: [B, T, C] -> [B, T, C].
  Variable Forward(Tape& tape, const Variable& x) const;
  // res + Forward(x), the residual added by the output projection (Linear::ForwardResidual).
  Variable ForwardResidual(Tape& tape, const Variable& x, const Variable& res) const;

 private:
  Linear qkv_, proj_;
  int64_t heads_ = 0;
};

}  // namespace lockstep::nn
