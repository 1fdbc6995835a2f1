// RMSNorm over the last dimension, transformers' LlamaRMSNorm in fp32:
//   y = (x * rsqrt(mean(x^2) + eps)) * weight          (no mean subtracted, no bias)
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/autograd/tape.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

// x: [..., C]; weight: [C]. Saves rsqrt(mean(x^2) + eps) per row for backward.
Variable RmsNormForward(Tape& tape, const Variable& x, const Variable& weight, float eps);

// Registers "<prefix>.weight" ([dim], ones, no decay).
class RmsNorm {
 public:
  RmsNorm() = default;
  RmsNorm(ParameterStore& ps, const std::string& prefix, int64_t dim, float eps);

  Variable Forward(Tape& tape, const Variable& x) const;
  int weight_index() const { return w_; }

 private:
  const ParameterStore* ps_ = nullptr;
  int w_ = -1;
  float eps_ = 1e-5f;
};

}  // namespace lockstep::nn
