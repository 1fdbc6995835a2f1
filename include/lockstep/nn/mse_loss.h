// Mean squared error, mean over every element (PyTorch's MSELoss, reduction='mean'): the
// regression loss of a user's model (examples/mlp_regression).
#pragma once

#include <cstdint>

#include "lockstep/autograd/tape.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

// pred: [n, d]; targets: n*d floats (copied: the caller's buffer need not outlive the step).
// Returns the mean loss as a [1] Variable; backward adds 2 (pred - target) / (n d) x d(loss).
Variable MseLossForward(Tape& tape, const Variable& pred, const float* targets);

// Evaluation helper (no tape): the sum over rows of each row's mean squared error, so that
// sum / rows is the mean loss whatever the batch split.
double MseRowSum(const float* pred, const float* targets, int64_t n, int64_t d);

}  // namespace lockstep::nn
