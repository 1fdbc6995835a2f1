// Megatron's tensor-parallel linear layers as autograd ops, over the canonical slices of
// TpContext (see tp_context.h for why slices).
//
// Column-parallel (qkv, MLP up, LM head): the weight's output rows are split; rank t holds
// rows of its slices and produces their outputs; the input is replicated, so the input
// gradient is a sum over slices (one allreduce in backward: Megatron's "f").
// Row-parallel (attention out, MLP down): the weight's input columns are split; each slice
// multiplies its part of the input, the partial outputs are summed over slices (one allreduce
// in forward: Megatron's "g"), then the replicated bias is added.
//
// In deterministic mode every slice's weight is first copied into a contiguous scratch matrix
// (and its weight gradient computed there, then added into the parameter's), so each GEMM
// has the same shape and strides at every tp degree: identical bits. Outside it each rank
// has one slice and uses its weight in place. With tp = 1 and no determinism the ops are the
// plain nn::LinearForward.
#pragma once

#include <vector>

#include "lockstep/autograd/tape.h"
#include "lockstep/parallel/tp_context.h"

namespace lockstep::parallel {

using autograd::Tape;
using autograd::Variable;

// x: [..., in] (replicated). w: local weight [out_local, in]; b: local bias [out_local] or
// undefined. The local output rows are `parts` equal blocks (3 for a fused q|k|v projection,
// else 1), each cut into local_slices() equal pieces; slice j takes piece j of every block,
// in block order. Returns local_slices() outputs, each [..., out_local / local_slices()].
// With gelu, each output is gelu of the product (nn::LinearGeluForward, slice by slice).
std::vector<Variable> ColumnParallelLinear(Tape& tape, TpContext& tp, const Variable& x, const Variable& w,
                                           const Variable& b, int parts, bool gelu = false);

// xs: local_slices() inputs, each [..., in_local / local_slices()]; w: local weight
// [out, in_local] (columns of this rank's slices, in slice order); b: replicated [out] or
// undefined. Returns [..., out], identical on every tp rank.
Variable RowParallelLinear(Tape& tape, TpContext& tp, const std::vector<Variable>& xs, const Variable& w,
                           const Variable& b);
// res + RowParallelLinear(xs, w, b): one op (nn::LinearResidualForward) without tensor
// parallelism; the sliced path adds res after the slices' sum.
Variable RowParallelLinearResidual(Tape& tape, TpContext& tp, const std::vector<Variable>& xs, const Variable& w,
                                   const Variable& b, const Variable& res);

}  // namespace lockstep::parallel
