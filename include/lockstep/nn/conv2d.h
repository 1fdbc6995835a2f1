// 2-D convolution (NCHW input, OIHW weights) through oneDNN plans from tensor/conv.h.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "lockstep/autograd/tape.h"
#include "lockstep/nn/parameter_store.h"
#include "lockstep/tensor/conv.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

// x: [N, IC, H, W]; w: [OC, IC, KH, KW]; b: [OC] or undefined; `plan` must be built for
// exactly this shape and outlive the tape's backward. Returns [N, OC, OH, OW].
Variable Conv2dForward(Tape& tape, tensor::Conv2d* plan, const Variable& x, const Variable& w, const Variable& b);
void Conv2dBackward(tensor::Conv2d* plan, const Variable& y, const Variable& x, const Variable& w, const Variable& b,
                    autograd::BufferPool* pool);
// maxpool2x2(relu(conv(x))) in one op: [N, OC, OH/2, OW/2], the same values and gradients as
// ReluMaxPool2x2Forward(Conv2dForward(...)) without the full-resolution activation (neither
// kept for backward nor, on blocked plans, reordered; tensor::Conv2d::ForwardReluPool).
Variable Conv2dReluPoolForward(Tape& tape, tensor::Conv2d* plan, const Variable& x, const Variable& w,
                               const Variable& b);

// Registers "<prefix>.weight" [OC, IC, K, K] (decayed) and "<prefix>.bias" [OC], both with
// PyTorch's default init U(+-1/sqrt(IC*K*K)). Keeps one oneDNN plan per batch size; plans
// are bound to the thread that made them, so a Conv2d serves one rank thread.
class Conv2d {
 public:
  Conv2d() = default;
  Conv2d(ParameterStore& ps, const std::string& prefix, int64_t in_channels, int64_t out_channels, int64_t kernel,
         int64_t stride, int64_t pad);

  // Not const: may build (and cache) the plan for a new input shape.
  Variable Forward(Tape& tape, const Variable& x);
  // maxpool2x2(relu(Forward(x))) fused (Conv2dReluPoolForward).
  Variable ForwardReluPool(Tape& tape, const Variable& x);

  int64_t out_channels() const { return oc_; }
  // Multiply-accumulates of one sample's forward, for FLOP accounting.
  int64_t MacsPerSample(int64_t h, int64_t w) const;

 private:
  const ParameterStore* ps_ = nullptr;
  int64_t ic_ = 0, oc_ = 0, k_ = 0, stride_ = 1, pad_ = 0;
  int w_ = -1, b_ = -1;
  tensor::Conv2d* PlanFor(const Variable& x);
  // Keyed by (N, H, W).
  std::map<std::array<int64_t, 3>, std::unique_ptr<tensor::Conv2d>> plans_;
};

}  // namespace lockstep::nn
