#include "lockstep/autograd/recompute.h"

#include <memory>

namespace lockstep::autograd {

Variable Recompute(Tape& tape, const Variable& x, const std::vector<Variable>& params, RecomputeFn fn) {
  if (!tape.grad_enabled()) return fn(tape, x);
  BufferPool* pool = &tape.pool();
  tensor::Tensor y_value;
  {
    Tape inner(pool);
    Variable leaf = Variable::Activation(x.value(), /*requires_grad=*/true, pool);
    y_value = fn(inner, leaf).value();
  }  // the inner tape's ops, and the activations they saved, are gone here
  std::vector<Variable> targets = params;
  if (x.requires_grad()) targets.push_back(x);
  const bool record = !targets.empty();
  Variable y = Variable::Activation(y_value, /*requires_grad=*/record, pool);
  if (!record) return y;
  tape.Record(targets, [x, y, pool, fn = std::move(fn)]() {
    if (!y.has_grad()) return;  // nothing flowed back: no gradient for x or the parameters
    Tape inner(pool);
    Variable leaf = Variable::Activation(x.value(), /*requires_grad=*/true, pool);  // as in forward
    Variable out = fn(inner, leaf);
    inner.BackwardFrom(out, y.grad_data());
    if (leaf.has_grad() && !x.AdoptGrad(leaf.grad())) {
      const float* g = leaf.grad_data();
      float* dst = x.GradAccumulate();
      for (int64_t i = 0, n = x.numel(); i < n; ++i) dst[i] += g[i];
    }
  });
  return y;
}

}  // namespace lockstep::autograd
