#include "lockstep/nn/tied_weight.h"

#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

using autograd::Variable;

Variable TiedHeadWeight(autograd::Tape& tape, const Variable& table) {
  if (!tape.ShouldRecord({&table})) return Variable::Constant(table.value());
  Variable head = Variable::Activation(table.value(), /*requires_grad=*/true, &tape.pool());
  tape.Record({table}, [table, head] {
    if (!head.has_grad() || !table.requires_grad()) return;
    // table's gradient holds the embedding's part e by now; the sum is e + h.
    tensor::AddInPlace(table.GradAccumulate(), head.grad_data(), table.numel());
  });
  return head;
}

}  // namespace lockstep::nn
