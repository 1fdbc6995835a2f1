// Residual add and reshape views.
#pragma once

#include "lockstep/autograd/tape.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

// out = a + b (same shape). Backward hands d(out) itself to `a` when `a` has no gradient
// yet (the residual stream: no copy) and adds it into b's.
Variable AddForward(Tape& tape, const Variable& a, const Variable& b);
void AddBackward(const Variable& out, const Variable& a, const Variable& b);
// a's share of d(out) for an op whose output adds `a` unchanged (a residual): hands the buffer
// over when a has no gradient yet (out must not read its gradient afterwards), else adds it.
void PassResidualGrad(const Variable& out, const Variable& a);

// A view of x with another shape (same numel; x contiguous). Shares x's storage; the
// gradient is passed through as a view as well.
Variable ReshapeForward(Tape& tape, const Variable& x, const tensor::Shape& shape);
void ReshapeBackward(const Variable& out, const Variable& x);

}  // namespace lockstep::nn
