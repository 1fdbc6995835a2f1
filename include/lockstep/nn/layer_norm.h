// LayerNorm over the last dimension: y = (x - mean) * rstd * weight + bias.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/autograd/tape.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

inline constexpr float kLayerNormEps = 1e-5f;  // PyTorch's default

// x: [..., C]; weight, bias: [C]. Saves mean and rstd per row for backward.
Variable LayerNormForward(Tape& tape, const Variable& x, const Variable& weight, const Variable& bias,
                          float eps = kLayerNormEps);
void LayerNormBackward(const Variable& y, const Variable& x, const Variable& weight, const Variable& bias,
                       const tensor::Tensor& mean, const tensor::Tensor& rstd);

// Registers "<prefix>.weight" (ones) and "<prefix>.bias" (zeros), both [dim], no decay.
class LayerNorm {
 public:
  LayerNorm() = default;
  LayerNorm(ParameterStore& ps, const std::string& prefix, int64_t dim);

  Variable Forward(Tape& tape, const Variable& x) const;

 private:
  const ParameterStore* ps_ = nullptr;
  int w_ = -1, b_ = -1;
};

}  // namespace lockstep::nn
