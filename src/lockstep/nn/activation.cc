#include "lockstep/nn/activation.h"

#include "lockstep/tensor/check.h"
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

Variable SwiGluForward(Tape& tape, const Variable& gate, const Variable& up) {
  LS_CHECK(gate.shape() == up.shape()) << "SwiGlu: gate " << gate.value().ToString() << ", up "
                                       << up.value().ToString();
  const bool rec = tape.ShouldRecord({&gate, &up});
  Variable y = tape.NewActivation(gate.shape(), rec);
  tensor::SwiGluForward(y.data(), gate.data(), up.data(), gate.numel());
  if (rec) {
    tape.Record({gate, up}, [y, gate, up] {
      if (!y.has_grad()) return;
      tensor::SwiGluBackward(gate.requires_grad() ? gate.GradAccumulate() : nullptr,
                             up.requires_grad() ? up.GradAccumulate() : nullptr, y.grad().data<float>(), gate.data(),
                             up.data(), gate.numel());
    });
  }
  return y;
}

}  // namespace lockstep::nn
