#include "lockstep/nn/activation.h"

#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

Variable GeluForward(Tape& tape, const Variable& x) {
  const bool rec = tape.ShouldRecord({&x});
  Variable y = tape.NewActivation(x.shape(), rec);
  tensor::GeluForward(y.data(), x.data(), x.numel());
  if (rec) tape.Record({x}, [y, x] { GeluBackward(y, x); });
  return y;
}

void GeluBackward(const Variable& y, const Variable& x) {
  if (!y.has_grad()) return;
  bool fresh = false;
  float* dx = x.GradForWrite(&fresh);
  tensor::GeluBackward(dx, x.data(), y.grad().data<float>(), x.numel(), /*accumulate=*/!fresh);
}

Variable ReluForward(Tape& tape, const Variable& x) {
  const bool rec = tape.ShouldRecord({&x});
  Variable y = tape.NewActivation(x.shape(), rec);
  tensor::ReluForward(y.data(), x.data(), x.numel());
  if (rec) tape.Record({x}, [y, x] { ReluBackward(y, x); });
  return y;
}

void ReluBackward(const Variable& y, const Variable& x) {
  if (!y.has_grad()) return;
  tensor::ReluBackward(x.GradAccumulate(), y.data(), y.grad().data<float>(), x.numel());
}

}  // namespace lockstep::nn
