// The algorithms of the mpi backend. Each runs on the communicator's executor thread, posts
// only nonblocking MPI operations on ctx.comm() and waits for them through ctx (deadline,
// poisoning), and returns when this rank's part is done. Arguments were validated at issue.
//
// Choice of algorithm (measured on one machine with OpenMPI 4.1 over vader/CMA):
//  - Reductions of more than kSmallReduceBytes: pipelined direct reduce-scatter. The vector
//    is cut into one block per rank; each rank receives its block from every peer in
//    segments (double-buffered), reduces the n inputs in rank order with ReduceRange (the
//    threads backend's kernel, hence the same bits), and for allreduce sends each reduced
//    segment straight to every peer (the all-gather overlaps the remaining reduce-scatter).
//    Over shared memory the peers' sends are single copies (CMA), and a rank reduces only
//    1/n of the vector. This beat MPI_Allreduce by 1.5-2.5x from 1 MiB up.
//  - Smaller reductions: one MPI_Iallgather of the whole inputs, then every rank reduces all
//    n inputs in rank order itself (one latency-bound exchange, same bits).
//  - All-gather, broadcast, all-to-all, barrier: MPI's nonblocking collectives.
//  - Deterministic allreduce: local tree over this rank's contributions, then the
//    reduce-scatter above with DeterministicTreeSum over the n partials as the combine step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/comm/communicator.h"
#include "lockstep/comm/mpi/exec_context.h"

namespace lockstep::comm::mpi_detail {

// Reductions up to this many bytes (count * element size) use the all-gather algorithm.
inline constexpr size_t kSmallReduceBytes = 32 << 10;
// Segment of the pipelined reduce-scatter, per peer and buffer (LOCKSTEP_MPI_SEGMENT_BYTES
// overrides, for tuning).
size_t SegmentBytes();

Status RunAllreduce(ExecContext& ctx, const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                    Algorithm algorithm);
Status RunReduceScatter(ExecContext& ctx, const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op);
Status RunAllGather(ExecContext& ctx, const void* send, void* recv, size_t send_count, DType dtype);
Status RunBroadcast(ExecContext& ctx, void* buf, size_t count, DType dtype, int root);
Status RunReduce(ExecContext& ctx, const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root);
Status RunAllToAll(ExecContext& ctx, const void* send, void* recv, size_t count_per_rank, DType dtype);
Status RunBarrier(ExecContext& ctx);
Status RunDeterministicAllreduce(ExecContext& ctx, const float* contributions, float* out, size_t count,
                                 int64_t total_contributions);

}  // namespace lockstep::comm::mpi_detail
