// Communicator: the collective-communication interface every backend implements (threads,
// mpi, later nccl). It moves typed spans of bytes, never Tensors, and depends only on core/.
//
// Model: gloo. Every collective takes an options struct and returns a waitable handle; every
// wait for peers has a timeout. Collectives are asynchronous: a call validates its arguments,
// enqueues the operation and returns at once. Operations of one communicator execute one at a
// time in issue order (like an NCCL stream), so communication overlaps the caller's compute.
//
// Contract for callers:
//  - Every rank of a communicator issues the same collectives in the same order with matching
//    count, dtype, root and reduce op. A mismatch is reported (never a crash): backends that
//    can check cheaply always do; LOCKSTEP_DEBUG_COLLECTIVES=1 makes every backend check.
//  - Buffers passed to a collective must stay valid, and must not be written (send) or read
//    (recv) by the caller, until its Work is Done() or Wait() has returned.
//  - A Communicator is driven by one thread at a time (its rank's thread). Work handles may be
//    waited on or polled from any thread.
//  - Each collective (not Send/Recv) gets the next sequence number of its communicator: 1, 2, ...
//    Error messages name it: "rank 0: collective allreduce #7 (count=4, dtype=f32) timed out
//    after 1.00 s waiting for rank(s) 1".
//  - After a timeout or desync the communicator is poisoned: later operations fail fast with
//    Aborted (on every rank that shares it, where the backend can tell them).
//  - Argument errors (InvalidArgument) are local: they fail that call only, consume no sequence
//    number and leave the communicator usable.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "lockstep/core/dtype.h"
#include "lockstep/core/result.h"
#include "lockstep/core/status.h"

namespace lockstep::comm {

// Element types (core/dtype.h). bf16 reduces in fp32 and rounds the result to nearest-even;
// kU8 is raw bytes and supports only movement (all-gather, broadcast, all-to-all, send/recv;
// reduce-scatter/allreduce/reduce are InvalidArgument). Average of integers is the sum divided
// by size() truncating toward 0.
using lockstep::DType;
using lockstep::DTypeName;
using lockstep::DTypeSize;

enum class ReduceOp { kSum, kAvg, kMax, kMin };
const char* ReduceOpName(ReduceOp op);  // "sum", "avg", "max", "min"

// Algorithm hint. kAuto lets the backend choose by size. kRing: bandwidth-optimal
// (reduce-scatter then all-gather; on the threads backend each rank reduces its own chunk of
// everybody's buffer). kDirect: latency-optimal (each rank reduces the whole vector itself).
// kDeterministic: the result bits depend only on the inputs and size(), never on timing or
// chunking (every backend's Allreduce must already satisfy this for a fixed world size; for
// world-size independence use DeterministicAllreduceF32). A backend may ignore a hint it
// cannot honour except kDeterministic.
enum class Algorithm { kAuto, kRing, kDirect, kDeterministic };
const char* AlgorithmName(Algorithm algorithm);  // "auto", "ring", "direct", "deterministic"

// The operations, for messages and for desync checks.
enum class OpKind {
  kAllreduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
  kSend,
  kRecv,
  kBarrier,
  kDeterministicAllreduce,
  kSplit,
};
// "allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "alltoall", "send",
// "recv", "barrier", "deterministic_allreduce", "split".
const char* OpKindName(OpKind kind);

// Default timeout of every collective: 300 s, or LOCKSTEP_COLLECTIVE_TIMEOUT_S (seconds, may
// be fractional) when set, or whatever SetDefaultTimeout set last (wins over the environment).
// Thread-safe.
std::chrono::milliseconds DefaultTimeout();
void SetDefaultTimeout(std::chrono::milliseconds timeout);

// True when LOCKSTEP_DEBUG_COLLECTIVES is set to anything but "" or "0" (read once).
bool DebugCollectivesFromEnv();

struct CollectiveOptions {
  // How long any wait for peers inside this operation may take, and the default of Wait().
  std::chrono::milliseconds timeout = DefaultTimeout();
  Algorithm algorithm = Algorithm::kAuto;
};

// A handle on one enqueued operation. Thread-safe.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation finished or `timeout` passed, and returns its Status. On expiry
  // the communicator is aborted (gloo semantics: a timed-out context is unusable) and a
  // Timeout status naming the collective is returned; the buffers are released either way
  // (the operation has stopped touching them when Wait returns).
  virtual Status Wait(std::chrono::milliseconds timeout) = 0;
  // Wait with the operation's own CollectiveOptions::timeout.
  // (Derived classes: add `using Work::Wait;` so this overload stays visible.)
  Status Wait() { return Wait(timeout()); }
  // Non-blocking: true once the operation finished (successfully or not).
  virtual bool Done() = 0;
  // The operation's CollectiveOptions::timeout.
  virtual std::chrono::milliseconds timeout() const = 0;
};
using WorkHandle = std::shared_ptr<Work>;

// A Work that is already finished with `status` (argument errors, fail-fast after abort).
WorkHandle CompletedWork(Status status);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend_name() const = 0;  // "threads", "mpi"

  // Collective over this communicator (synchronous, in issue order after pending work).
  // Ranks with the same color >= 0 form a new communicator, ordered by (key, parent rank);
  // color < 0 means "in no group" and yields a null pointer value.
  virtual Result<std::shared_ptr<Communicator>> Split(int color, int key, const CollectiveOptions& opts = {}) = 0;

  // recv[i] = op over ranks of send[i], i < count, on every rank. send == recv: in place.
  virtual WorkHandle Allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                               const CollectiveOptions& opts = {}) = 0;
  // send holds size()*recv_count elements; rank r receives the reduction of block r.
  // In place: recv == (char*)send + rank()*recv_count*DTypeSize(dtype), as in NCCL.
  virtual WorkHandle ReduceScatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                                   const CollectiveOptions& opts = {}) = 0;
  // recv holds size()*send_count elements; block r comes from rank r.
  // In place: send == (char*)recv + rank()*send_count*DTypeSize(dtype).
  virtual WorkHandle AllGather(const void* send, void* recv, size_t send_count, DType dtype,
                               const CollectiveOptions& opts = {}) = 0;
  // buf of `root` is copied into buf of every rank.
  virtual WorkHandle Broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& opts = {}) = 0;
  // recv of `root` = op over ranks of send; recv is ignored (may be null) on other ranks.
  virtual WorkHandle Reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
                            const CollectiveOptions& opts = {}) = 0;
  // send and recv hold size()*count_per_rank elements; block p of send goes to rank p and
  // lands in block rank() of its recv. send == recv: in place.
  virtual WorkHandle AllToAll(const void* send, void* recv, size_t count_per_rank, DType dtype,
                              const CollectiveOptions& opts = {}) = 0;
  // Point-to-point, in issue order with the collectives. Messages between one pair of ranks
  // with one tag arrive in order; Recv's count and dtype must match the Send's. A Send may
  // complete before the matching Recv is issued (it never deadlocks against a Send the peer
  // issues first). No sequence number; messages name the peer and tag.
  virtual WorkHandle Send(const void* buf, size_t count, DType dtype, int peer, int tag,
                          const CollectiveOptions& opts = {}) = 0;
  virtual WorkHandle Recv(void* buf, size_t count, DType dtype, int peer, int tag,
                          const CollectiveOptions& opts = {}) = 0;
  // Completes on each rank once every rank has called it.
  virtual WorkHandle Barrier(const CollectiveOptions& opts = {}) = 0;

  // World-size-independent sum. The logical input is V = total_contributions vectors of
  // `count` floats; V must be a power of two and a multiple of size() (else InvalidArgument),
  // and rank r holds contributions r*V/N .. (r+1)*V/N - 1 consecutively in `contributions`
  // (V/N * count floats). Every rank receives in `out` (count floats; may alias
  // `contributions`) the elementwise sum over one fixed complete binary tree over contribution
  // index, ((c0+c1)+(c2+c3))+((c4+c5)+(c6+c7)) ..., so the bits are identical whatever the
  // world size, chunking or timing. A rank's V/N contributions are a complete subtree: the
  // backend reduces them locally, then combines the N partials in the fixed upper tree.
  // See docs/deterministic-reduction.md.
  virtual WorkHandle DeterministicAllreduceF32(const float* contributions, float* out, size_t count,
                                               int64_t total_contributions, const CollectiveOptions& opts = {}) = 0;

  // Poisons this communicator: pending and later operations fail with Aborted carrying
  // `reason`. Backends that share memory also fail the peers' pending operations.
  virtual void Abort(const Status& reason) = 0;
};

// out[i] = fixed pairwise tree sum over inputs[0..n)[i], i < count; n must be a power of two
// (n >= 1). inputs[k] points at `count` floats. The same tree DeterministicAllreduceF32 uses;
// out may alias inputs[0]. Pure function, for tests and backends.
void DeterministicTreeSum(const float* const* inputs, int64_t n, float* out, size_t count);

// Checks V for DeterministicAllreduceF32 on a world of `world_size` ranks.
Status ValidateDeterministicContributions(int64_t total_contributions, int world_size);

}  // namespace lockstep::comm
