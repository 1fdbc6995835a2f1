// The f32 reduction kernel behind ReduceRange (internal to comm/): one pass that loads a few
// vectors from every input, combines them in registers and stores the result to every output.
//
// Why not reduce into an L1 block first and copy it out (what the bf16 and integer kernels
// do): at sizes that stream from memory that costs two extra L1 passes per element and keeps
// fewer memory streams in flight; the fused loop ran at 1.5-1.7x its bandwidth on this
// machine (6.6 vs 4.1 GB/s per core for 2 inputs and 2 streamed outputs at 64 MiB).
#pragma once

#include <cstddef>

#include "lockstep/comm/communicator.h"

namespace lockstep::comm {

// outputs[k][i] = op(inputs[0][i], ..., inputs[n_inputs-1][i]) (avg: then / avg_divisor) for
// i in [begin, end) and every k < n_outputs. Same contract and bits as ReduceRange, including
// outputs that alias inputs at the same index. `stream`: write with non-temporal stores
// (where the outputs' alignment allows) and fence before returning.
void ReduceF32Fused(ReduceOp op, const void* const* inputs, int n_inputs, void* const* outputs, int n_outputs,
                    size_t begin, size_t end, int avg_divisor, bool stream);

}  // namespace lockstep::comm
