// Linear layer: y = x W^T + b over the last dimension.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/autograd/tape.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

// x: [..., IC]; w: [OC, IC]; b: [OC] or undefined. Returns y: [..., OC].
Variable LinearForward(Tape& tape, const Variable& x, const Variable& w, const Variable& b);
// Accumulates dx (when x requires grad), dw, db from dy = y.grad(); no-op without dy.
void LinearBackward(const Variable& y, const Variable& x, const Variable& w, const Variable& b);
// The same from a gradient dy (x's rows by w's rows) held outside a Variable.
void LinearBackwardFrom(const float* dy, const Variable& x, const Variable& w, const Variable& b);
// gelu(LinearForward(x, w, b)) as one op (the MLP's up-projection): the bias is added on the
// GELU's pass, and the pre-activation buffer, which nothing else reads, keeps gelu' for
// backward and then holds d(pre-activation) itself. Saves a write of the [.., OC] output and
// the pre-activation's gradient buffer against LinearForward + GeluForward.
Variable LinearGeluForward(Tape& tape, const Variable& x, const Variable& w, const Variable& b);
// res + LinearForward(x, w, b) as one op (a block's attention and MLP output projections with
// the residual add): the bias and res seed the output, the product is added into it. Saves the
// branch output's write and read and, in backward, its gradient's copy: d(out) is read by the
// projection's backward and then handed to res.
Variable LinearResidualForward(Tape& tape, const Variable& res, const Variable& x, const Variable& w,
                               const Variable& b);

// Registers "<prefix>.weight" [out, in] (decayed) and, with bias, "<prefix>.bias" [out].
class Linear {
 public:
  Linear() = default;
  Linear(ParameterStore& ps, const std::string& prefix, int64_t in, int64_t out, bool bias, Init weight_init,
         Init bias_init);
  // PyTorch's default nn.Linear init: U(+-1/sqrt(in)) for weight and bias.
  static Linear TorchDefault(ParameterStore& ps, const std::string& prefix, int64_t in, int64_t out, bool bias);

  Variable Forward(Tape& tape, const Variable& x) const;
  Variable ForwardGelu(Tape& tape, const Variable& x) const;  // gelu(Forward(x)), LinearGeluForward
  Variable ForwardResidual(Tape& tape, const Variable& x, const Variable& res) const;  // res + Forward(x)

  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  int weight_index() const { return w_; }
  int bias_index() const { return b_; }  // -1 without bias

 private:
  Variable BiasVar() const;  // the bias, or an undefined Variable without one
  const ParameterStore* ps_ = nullptr;
  int64_t in_ = 0, out_ = 0;
  int w_ = -1, b_ = -1;
};

}  // namespace lockstep::nn
