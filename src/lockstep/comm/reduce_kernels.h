// Elementwise reduction and bf16 conversion kernels shared by the backends. AVX2 for f32 and
// bf16 (x86-64-v3 is the build floor), plain loops for integers.
//
// Summation order is fixed: inputs[0] op inputs[1] op ... op inputs[n-1], left to right, so
// every rank that computes an element gets the same bits. bf16 accumulates in fp32 and rounds
// once at the end (nearest-even). Avg divides the sum by `n` (integers: truncating).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/bf16.h"  // bf16 <-> fp32, RNE rounding

namespace lockstep::comm {

// For i in [begin, end): r = op(inputs[0][i], ..., inputs[n_inputs-1][i]) and, for avg,
// r = r / avg_divisor; then outputs[k][i] = r for every k < n_outputs. Indices are elements of
// `dtype`. Safe when outputs alias inputs at the same index (in place): each block of
// elements is read from every input before any output is written. `dtype` must not be kU8 (raw bytes).
void ReduceRange(DType dtype, ReduceOp op, const void* const* inputs, int n_inputs, void* const* outputs, int n_outputs,
                 size_t begin, size_t end, int avg_divisor);

// The same with the store kind chosen by the caller: `stream` writes the outputs with
// non-temporal stores (fenced before returning). For callers that split one large reduction
// into many small calls, which must stream when the whole does (see StreamOutputs).
void ReduceRange(DType dtype, ReduceOp op, const void* const* inputs, int n_inputs, void* const* outputs, int n_outputs,
                 size_t begin, size_t end, int avg_divisor, bool stream);

// Whether a reduction that writes `out_bytes` in all should stream its outputs: true when
// they cannot stay in the caches anyway, so that skipping the read-for-ownership of every
// destination line saves a third of the memory traffic.
bool StreamOutputs(size_t out_bytes);

}  // namespace lockstep::comm
