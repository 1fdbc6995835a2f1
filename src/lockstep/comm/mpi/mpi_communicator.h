// The mpi backend: lockstep's Communicator over OpenMPI, for ranks that are processes started
// by mpirun (see launch.h), on one machine or many.
//
// Execution: like the threads backend, operations of one communicator run one at a time in
// issue order on the communicator's progress thread, so they overlap the caller's compute.
// Every MPI operation is nonblocking and polled against the operation's deadline, so nothing
// waits forever. Algorithms (see collectives.h): reductions use lockstep's own pipelined
// direct reduce-scatter (+ all-gather) over MPI point-to-point, which reduces each element
// over ranks 0, 1, ..., n-1 in order with the threads backend's kernels, so Allreduce gives
// the same bits on both backends; data movement uses MPI's own nonblocking collectives.
// DeterministicAllreduceF32 evaluates the same fixed tree as the threads backend.
//
// Failure handling: a timeout or desync poisons the communicator (later operations fail with
// Aborted) and, when all ranks share one machine, raises a flag in shared memory that makes
// peers blocked in the same communicator fail at once. MPI cannot cancel a started native
// collective: after a timeout its buffers may still be written if the late peer shows up, so
// the caller must end the job (AbortMpi) rather than continue; an exit with such operations
// pending aborts the job with status 1 instead of hanging in MPI_Finalize.
#pragma once

#include <cstddef>
#include <memory>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/result.h"

namespace lockstep::comm {

struct MpiOptions {
  // Before each collective, all-gather every rank's call (op, count, dtype, root, reduce op)
  // and fail on every rank with a message naming each rank's call when they differ.
  bool debug_collectives = DebugCollectivesFromEnv();
};

// Initializes MPI on first use (MPI_THREAD_MULTIPLE) and returns a new communicator over all
// ranks of the job (a duplicate of MPI_COMM_WORLD). Collective: every rank must call it.
// Outside mpirun it is a world of one rank.
Result<std::shared_ptr<Communicator>> CreateMpiCommunicator(const MpiOptions& options = {});

// Ends the whole MPI job with exit status `code` (MPI_Abort on MPI_COMM_WORLD). Use after a
// collective failed: the peers may be blocked, and mpirun kills them. Without MPI initialized
// it just exits the process with `code`.
[[noreturn]] void AbortMpi(int code);

// Plain blocking MPI_Allreduce on `comm` (an mpi backend communicator) with MPI's own
// algorithm, as the baseline of `lockstep bench-comm`. f32/i32/i64 with sum/max/min only.
// Must not overlap operations of `comm` that are still pending.
Status NativeMpiAllreduce(Communicator& comm, const void* send, void* recv, size_t count, DType dtype, ReduceOp op);

}  // namespace lockstep::comm
