// The pipelined direct reduce-scatter (+ optional all-gather) that the mpi backend's
// reductions share; see collectives.h for why. Internal to comm/mpi/.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "lockstep/comm/mpi/exec_context.h"

namespace lockstep::comm::mpi_detail {

// Block p of a vector: elements [off[p], off[p] + len[p]).
struct BlockLayout {
  std::vector<size_t> off;
  std::vector<size_t> len;
};
// `count` elements cut into n blocks of nearly equal size (the first count % n get one more).
BlockLayout EvenBlocks(size_t count, int n);
// n blocks of `per_rank` elements each (reduce-scatter).
BlockLayout FixedBlocks(size_t per_rank, int n);

// Reduces n segments of `len` elements, inputs[q] being rank q's, into out. `out` may alias
// the input of this rank at the same index.
using CombineFn = std::function<void(const void* const* inputs, void* out, size_t len)>;

struct PipelineArgs {
  const void* send = nullptr;  // this rank's whole input vector (every block)
  const BlockLayout* blocks = nullptr;
  size_t elem_size = 0;
  void* reduced = nullptr;  // receives this rank's reduced block (len[rank] elements)
  // Allreduce: the whole output vector. Each reduced segment is sent to every peer as soon as
  // it is ready and the peers' land at off[p]. May equal `send` (in place). Null: no gather.
  void* gather_to = nullptr;
  CombineFn combine;
};

// Every rank calls it with the same layout and element size.
Status PipelinedReduceScatter(ExecContext& ctx, const PipelineArgs& args);

// Small vectors: all-gathers every rank's `count` elements (MPI_Iallgather) and combines all
// n inputs locally into `out` (count elements; may equal `send`).
Status GatherAndCombine(ExecContext& ctx, const void* send, size_t count, size_t elem_size, void* out,
                        const CombineFn& combine);

}  // namespace lockstep::comm::mpi_detail
