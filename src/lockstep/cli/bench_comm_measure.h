// The measurement core of bench-comm, the same for every backend: each rank of a
// communicator calls MeasurePoint with the same arguments. Internal to cli/.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/result.h"

namespace lockstep::cli {

enum class BenchOp { kAllreduce, kReduceScatter, kAllGather, kBroadcast };
const char* BenchOpName(BenchOp op);  // "allreduce", "reduce_scatter", "all_gather", "broadcast"

// One line of a table.
struct BenchPoint {
  BenchOp op = BenchOp::kAllreduce;
  int64_t bytes = 0;  // the whole vector (n blocks for reduce-scatter/all-gather)
  int64_t count = 0;  // elements of `bytes`
  int root = -1;
  int iters = 0;
  double time_us = 0;     // per iteration, slowest rank
  double algbw = 0;       // GB/s (1e9 bytes/s): bytes / time
  double busbw = 0;       // GB/s, nccl-tests' bus bandwidth
  int64_t wrong = 0;      // wrong elements, all ranks together
  double mpi_busbw = -1;  // allreduce baseline (MPI_Allreduce), < 0 when not measured
};

// nccl-tests' factor from algbw to busbw.
double BusFactor(BenchOp op, int n);

// Sizes in bytes from min to max, doubling; each rounded down to whole f32 elements (times n
// for reduce-scatter and all-gather), at least one element per rank.
std::vector<int64_t> BenchSizes(BenchOp op, int n, int64_t min_bytes, int64_t max_bytes);

// Timed iterations for a size when the user gave none: about 256 MiB moved per size,
// between 5 and 1000.
int AutoIters(int64_t bytes);

// Warm-up, `iters` timed iterations, then the exact check. Collective over `comm`.
Result<BenchPoint> MeasurePoint(comm::Communicator& comm, BenchOp op, int64_t bytes, int iters);

// Average of plain MPI_Allreduce (f32 sum) over `bytes`, slowest rank, in us. mpi backend.
Result<double> MeasureNativeMpiAllreduceUs(comm::Communicator& comm, int64_t bytes, int iters);

}  // namespace lockstep::cli
