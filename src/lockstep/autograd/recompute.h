// Activation recompute (torch.utils.checkpoint, Megatron's full recompute): run a piece of the
// forward pass keeping only its input, and redo that forward inside backward.
//
// Recompute(tape, x, params, fn) runs y = fn(inner, x') on an inner tape that borrows `tape`'s
// buffer pool, where x' is a leaf holding x's values; the inner tape is then cleared, so every
// activation fn saved for backward is freed at once (and reused by the next piece). On `tape` it
// records one op whose backward runs fn again on a fresh inner tape, recording, and backpropagates
// y's gradient through it into x and `params`. fn must compute the same thing both times (the
// same ops in the same order on the same values: lockstep's kernels are deterministic), so the
// gradients are bit for bit those of running fn directly on `tape`. The forward pass is recorded
// (not run in no-grad mode) so that both runs take exactly the same kernel paths.
//
// `params` must list every parameter fn uses (the outer tape counts them for the
// gradient-ready hook). Communication inside fn (a tensor-parallel allreduce) runs again in
// backward, in the same order on every rank. With gradients disabled Recompute is just fn.
#pragma once

#include <functional>
#include <vector>

#include "lockstep/autograd/tape.h"

namespace lockstep::autograd {

using RecomputeFn = std::function<Variable(Tape& tape, const Variable& x)>;

Variable Recompute(Tape& tape, const Variable& x, const std::vector<Variable>& params, RecomputeFn fn);

}  // namespace lockstep::autograd
