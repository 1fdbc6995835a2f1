// ExecContext: what an operation sees while it runs on its communicator's executor: the MPI
// communicator, its rank and size, scratch memory, and the poll loop that waits for MPI
// requests against the operation's deadline. Also CommState, the failure state a
// communicator shares with its Work handles. Internal to comm/mpi/.
#pragma once

#include "lockstep/comm/mpi/mpi_include.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "lockstep/comm/call_desc.h"
#include "lockstep/comm/mpi/status_board.h"
#include "lockstep/core/clock.h"
#include "lockstep/core/status.h"

namespace lockstep::comm::mpi_detail {

// Poisoning and the status board of one communicator. Thread-safe.
class CommState {
 public:
  CommState(int rank, int size, std::unique_ptr<StatusBoard> board)
      : rank_(rank), size_(size), board_(std::move(board)) {}
  int rank() const { return rank_; }
  int size() const { return size_; }
  const StatusBoard& board() const { return *board_; }
  StatusBoard& board() { return *board_; }

  // First reason wins; raises this rank's flag on the board. Idempotent.
  void Poison(const Status& reason);
  bool poisoned() const { return poisoned_.load(std::memory_order_acquire); }
  Status poison_reason() const;

  // The Aborted status of operation `d` (#seq for collectives) on a poisoned communicator.
  Status AbortedStatus(const CallDesc& d, uint64_t seq) const;
  // "allreduce #3 (count=4, dtype=f32)" or "recv from rank 1 (tag=5, count=4, dtype=f32)".
  static std::string Label(const CallDesc& d, uint64_t seq);

 private:
  const int rank_;
  const int size_;
  std::unique_ptr<StatusBoard> board_;
  mutable std::mutex mu_;
  Status reason_;
  std::atomic<bool> poisoned_{false};
};

// Whether requests may be cancelled when an operation is abandoned (MPI forbids cancelling
// nonblocking collectives).
enum class RequestKind { kPointToPoint, kCollective };

class ExecContext {
 public:
  ExecContext(CommState& state, MPI_Comm comm, const CallDesc& desc, uint64_t seq, int64_t deadline_ns,
              std::vector<unsigned char>* scratch)
      : state_(state), comm_(comm), desc_(desc), seq_(seq), deadline_ns_(deadline_ns), scratch_(scratch) {}

  int rank() const { return state_.rank(); }
  int size() const { return state_.size(); }
  MPI_Comm comm() const { return comm_; }
  const CallDesc& desc() const { return desc_; }
  uint64_t seq() const { return seq_; }
  CommState& state() { return state_; }

  // Polls until every request in reqs[0..n) is complete (MPI_REQUEST_NULL counts as
  // complete; completed ones become MPI_REQUEST_NULL). Fails with Timeout at the deadline
  // (message per call_desc.h, naming the missing ranks when the board can tell), Aborted
  // when this communicator or a peer's was poisoned, Internal on an MPI error. On failure the
  // remaining requests are abandoned: receives cancelled, the rest recorded so finalization
  // aborts instead of hanging. `statuses` (n entries) may be null.
  // `abort_grace_ns` > 0: after the communicator (or a peer's) is found aborted, keep polling
  // this long before giving up, for requests every live rank has certainly posted (the
  // debug check's all-gather: the peer that aborted did so after completing its own), so that
  // they finish instead of being abandoned (which makes finalization abort the whole job).
  Status WaitAll(MPI_Request* reqs, int n, MPI_Status* statuses, RequestKind kind, int64_t abort_grace_ns = 0);
  Status WaitAll(std::vector<MPI_Request>& reqs, RequestKind kind) {
    return WaitAll(reqs.data(), static_cast<int>(reqs.size()), nullptr, kind);
  }
  // Abandons outstanding requests (see WaitAll) without waiting for them.
  void Abandon(MPI_Request* reqs, int n, RequestKind kind);

  // An MPI return code as a Status naming the call and this operation.
  Status Check(int rc, const char* call);

  // Scratch memory owned by the communicator, reused across operations (grows, never
  // shrinks). One region per operation: callers carve it up.
  unsigned char* Scratch(size_t bytes);

 private:
  Status CheckProgress(int64_t now_ns);
  Status TimeoutStatus(int64_t now_ns);

  CommState& state_;
  MPI_Comm comm_;
  const CallDesc& desc_;
  const uint64_t seq_;
  const int64_t deadline_ns_;
  const int64_t start_ns_ = NowNanos();
  std::vector<unsigned char>* scratch_;
};

}  // namespace lockstep::comm::mpi_detail
