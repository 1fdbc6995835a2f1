// Elementwise activations: GELU (tanh approximation, PyTorch approximate='tanh') and ReLU.
#pragma once

#include "lockstep/autograd/tape.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

Variable GeluForward(Tape& tape, const Variable& x);
void GeluBackward(const Variable& y, const Variable& x);
// GeluForward for an input that nothing else reads (the MLP's up-projection): when recording,
// x's value is overwritten with gelu'(x), computed together with gelu(x), so backward is one
// multiply and saves no more memory than GeluForward (which keeps x). Same bits as
// GeluForward + GeluBackward. A parameter input falls back to GeluForward.
Variable GeluForwardConsumingInput(Tape& tape, const Variable& x);

// Backward uses the output (y > 0 <=> x > 0), so x's value is not kept alive for it.
Variable ReluForward(Tape& tape, const Variable& x);
void ReluBackward(const Variable& y, const Variable& x);

}  // namespace lockstep::nn
