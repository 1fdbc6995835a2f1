// Variable: a cheap shared handle to a value Tensor and its gradient.
//
// Three kinds:
//  - Constant:   inputs, targets, masks; never has a gradient.
//  - Activation: an op's result. Its gradient is allocated on first use (from the tape's
//                BufferPool when it has one), so an activation nothing flowed into costs
//                nothing, and a backward closure can tell "no gradient" from "zero".
//  - Parameter:  its value and gradient are views into the model's flat parameter and
//                gradient buffers (nn::ParameterStore); param_index() is its position
//                there, the index the tape's gradient-ready hook reports.
//
// Copies share state (like torch.Tensor). Gradients are accumulated with +=, so a
// Variable used by several ops sums their contributions. An activation's gradient is
// only meaningful until the backward of the op that produced it has run: ops whose input
// gradient equals their output gradient (residual add, reshape) hand the buffer over
// instead of copying it (AdoptGrad/TakeGrad). Parameter gradients are never moved.
// Not thread-safe: a Variable belongs to the rank thread that made it.
#pragma once

#include <memory>

#include "lockstep/tensor/tensor.h"

namespace lockstep::autograd {

class BufferPool;

class Variable {
 public:
  Variable() = default;

  static Variable Constant(tensor::Tensor value);
  // `pool` (nullable) provides the gradient buffer when one is first needed.
  static Variable Activation(tensor::Tensor value, bool requires_grad, BufferPool* pool);
  // `grad` must have value's shape; both are typically views into flat buffers.
  static Variable Parameter(tensor::Tensor value, tensor::Tensor grad, int param_index);

  bool defined() const { return impl_ != nullptr; }
  const tensor::Tensor& value() const { return impl_->value; }
  const tensor::Shape& shape() const { return impl_->value.shape(); }
  int64_t numel() const { return impl_->value.numel(); }
  // fp32 data of the value (mutable: the handle does not own constness of the data).
  float* data() const { return impl_->value.data<float>(); }

  bool requires_grad() const { return impl_ != nullptr && impl_->requires_grad; }
  bool is_parameter() const { return impl_ != nullptr && impl_->param_index >= 0; }
  int param_index() const { return impl_->param_index; }

  // True when a gradient buffer exists (always for parameters).
  bool has_grad() const { return impl_->grad.defined(); }
  // The gradient; undefined Tensor when none has been allocated.
  const tensor::Tensor& grad() const { return impl_->grad; }
  // fp32 data of the gradient (which must exist).
  float* grad_data() const { return impl_->grad.data<float>(); }

  // Gradient buffer to accumulate (+=) into; allocated and zeroed on first use.
  // Requires requires_grad().
  float* GradAccumulate() const;
  // For kernels that can either overwrite or accumulate. If no gradient exists yet, one is
  // allocated uninitialised, *fresh is set to true, and the caller must write every
  // element; otherwise *fresh is false and the caller must accumulate.
  float* GradForWrite(bool* fresh) const;
  // Gives this activation `g` (same numel; reshaped to this shape) as its gradient when
  // it has none yet; returns false and leaves everything unchanged otherwise (including
  // for parameters).
  bool AdoptGrad(const tensor::Tensor& g) const;
  // Moves the gradient out (activations only), leaving none.
  tensor::Tensor TakeGrad() const;

  // Parameters only: points value and gradient at other storage (or none: undefined
  // tensors), visible through every copy of this handle, including those captured by
  // recorded backward closures. ZeRO materialises a layer's parameters and gradients this
  // way just before they are used and releases them after.
  void Rebind(tensor::Tensor value, tensor::Tensor grad) const;

  // Identity of the shared state, for tests and debugging.
  const void* id() const { return impl_.get(); }

 private:
  struct Impl {
    tensor::Tensor value;
    tensor::Tensor grad;
    BufferPool* pool = nullptr;
    int param_index = -1;
    bool requires_grad = false;
  };
  tensor::Tensor NewGrad(bool zero) const;
  std::shared_ptr<Impl> impl_;
};

}  // namespace lockstep::autograd
