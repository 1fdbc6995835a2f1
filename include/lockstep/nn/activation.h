// Elementwise activations: GELU (tanh approximation, PyTorch approximate='tanh'), ReLU, and
// SwiGLU's gate.
#pragma once

#include "lockstep/autograd/tape.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

Variable GeluForward(Tape& tape, const Variable& x);
void GeluBackward(const Variable& y, const Variable& x);
// (The MLP fuses its GELU into the up-projection: nn::LinearGeluForward in linear.h.)

// SwiGLU's gate (the Llama MLP): silu(gate) * up, elementwise over equal shapes.
Variable SwiGluForward(Tape& tape, const Variable& gate, const Variable& up);

// Backward uses the output (y > 0 <=> x > 0), so x's value is not kept alive for it.
Variable ReluForward(Tape& tape, const Variable& x);
void ReluBackward(const Variable& y, const Variable& x);

}  // namespace lockstep::nn
