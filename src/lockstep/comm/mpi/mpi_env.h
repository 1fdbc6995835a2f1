// Process-wide MPI state of the mpi backend: initialization (once, MPI_THREAD_MULTIPLE when
// the library offers it), orderly finalization at exit, the lock that serializes MPI calls
// when it does not, and small conversions. Internal to comm/mpi/.
//
// Finalization: MPI_Finalize runs from an atexit handler registered by the first
// EnsureMpiInitialized(). Before it, every live communicator is shut down (its queued work
// drained, progress thread joined, MPI objects freed), so communicators held in globals are
// safe. If a timed-out operation left MPI requests that can never complete, MPI_Finalize would
// hang; the handler calls MPI_Abort(1) instead: the job exits non-zero, never hangs.
#pragma once

#include <memory>

#include "lockstep/comm/mpi/mpi_include.h"

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/status.h"

namespace lockstep::comm::mpi_detail {

// Initializes MPI on first use (thread-safe). Fails when MPI offers less than
// MPI_THREAD_SERIALIZED, which a progress thread per communicator needs.
Status EnsureMpiInitialized();

// True once MPI_Finalize ran (or began): no MPI call may be made any more.
bool MpiFinalized();

// Hold one of these around every MPI call. It takes a process-wide lock only when the
// library is not MPI_THREAD_MULTIPLE (then calls from different communicators' progress
// threads must not overlap); otherwise it costs a predictable branch.
class MpiCallGuard {
 public:
  MpiCallGuard();
  ~MpiCallGuard();
  MpiCallGuard(const MpiCallGuard&) = delete;
  MpiCallGuard& operator=(const MpiCallGuard&) = delete;

 private:
  bool locked_;
};

// While one exists, allocations of this thread are not leak-checked (LeakSanitizer builds
// only; a no-op otherwise). For MPI calls that set up MPI's own state (init, communicator
// creation): OpenMPI drops references to some of those allocations, and LeakSanitizer would
// report them as lockstep's leaks.
class IgnoreMpiLeaks {
 public:
  IgnoreMpiLeaks();
  ~IgnoreMpiLeaks();
  IgnoreMpiLeaks(const IgnoreMpiLeaks&) = delete;
  IgnoreMpiLeaks& operator=(const IgnoreMpiLeaks&) = delete;
};

// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string MpiErrorString(int code);

// The MPI element type of a dtype (bf16 travels as MPI_UINT16_T and is reduced by lockstep).
MPI_Datatype ElementType(DType dtype);

// Something that must be shut down before MPI_Finalize (a communicator). The registry calls
// Shutdown() from the atexit handler for every object still registered.
class MpiResource {
 public:
  virtual ~MpiResource() = default;
  virtual void ShutdownBeforeFinalize() = 0;
};
void RegisterResource(MpiResource* r);
void UnregisterResource(MpiResource* r);

// Records that a request of a timed-out or aborted operation was left behind (it cannot be
// cancelled, e.g. a native collective). Makes finalization abort instead of hanging.
void NoteAbandonedRequests(int n);
// Buffers of an abandoned request (a wait that gave up: timeout, or a peer poisoned the
// communicator) must not be freed: MPI may still write into them. Internal buffers are
// handed here and stay reachable until the process ends (ASan found the desync check's
// all-gather buffer written after it was freed, about one run in fifteen).
void KeepForever(std::shared_ptr<void> buffers);

}  // namespace lockstep::comm::mpi_detail
