// MpiCommunicator: one rank's end of an mpi-backend communicator: its operation queue, its
// progress thread (the executor), its Work handles. Algorithms live in collectives.cc.
// Internal to comm/mpi/; the public entry point is mpi_communicator.h.
//
// Execution model (as in the threads backend). Issue validates arguments, assigns collectives
// their sequence number and enqueues. Operations run one at a time in issue order, by
// whoever holds exec_mu_: the progress thread (true async progress), or the caller inside
// Work::Wait (no thread hand-off: small-message latency stays near MPI's own). Large
// operations and sends wake the progress thread at once; small ones leave it asleep and are
// run by the caller's Wait or, if nobody waits, by the progress thread within kLazyPickupNs.
// Send copies
// the message into a staging buffer and completes at once (so it never deadlocks against a
// Send the peer issued first); the staged MPI_Isend finishes in the background and is polled
// between operations. User Send/Recv travel on a duplicate MPI communicator, so their tags
// never meet the point-to-point traffic of lockstep's own algorithms.
#pragma once

#include "lockstep/comm/mpi/mpi_include.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lockstep/comm/call_desc.h"
#include "lockstep/comm/communicator.h"
#include "lockstep/comm/mpi/exec_context.h"
#include "lockstep/comm/mpi/mpi_communicator.h"
#include "lockstep/comm/mpi/mpi_env.h"
#include "lockstep/core/clock.h"

namespace lockstep::comm::mpi_detail {

using RunFn = std::function<Status(ExecContext& ctx)>;

class MpiCommunicator;

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<CommState> state, std::weak_ptr<MpiCommunicator> comm, const CallDesc& desc, uint64_t seq,
          const CollectiveOptions& opts, bool eager, RunFn run)
      : run(std::move(run)),
        desc(desc),
        seq(seq),
        opts(opts),
        eager(eager),
        enqueue_ns(NowNanos()),
        state_(std::move(state)),
        comm_(std::move(comm)) {}

  using Work::Wait;
  Status Wait(std::chrono::milliseconds timeout) override;
  bool Done() override { return done_.load(std::memory_order_acquire); }
  std::chrono::milliseconds timeout() const override { return opts.timeout; }

  // Executor side.
  void Finish(Status status);

  RunFn run;  // moved out by the executor
  const CallDesc desc;
  const uint64_t seq;  // 0 for send/recv
  const CollectiveOptions opts;
  const bool eager;  // wake the progress thread at once
  const int64_t enqueue_ns;

 private:
  std::shared_ptr<CommState> state_;
  std::weak_ptr<MpiCommunicator> comm_;  // for running inline in Wait
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  Status status_;
};

class MpiCommunicator final : public Communicator,
                              public MpiResource,
                              public std::enable_shared_from_this<MpiCommunicator> {
 public:
  // Takes ownership of `comm` (a fresh duplicate or split result). Collective over it.
  static Result<std::shared_ptr<MpiCommunicator>> Create(MPI_Comm comm, const MpiOptions& options);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return state_->rank(); }
  int size() const override { return state_->size(); }
  const char* backend_name() const override { return "mpi"; }

  Result<std::shared_ptr<Communicator>> Split(int color, int key, const CollectiveOptions& opts) override;
  WorkHandle Allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                       const CollectiveOptions& opts) override;
  WorkHandle ReduceScatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                           const CollectiveOptions& opts) override;
  WorkHandle AllGather(const void* send, void* recv, size_t send_count, DType dtype,
                       const CollectiveOptions& opts) override;
  WorkHandle Broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& opts) override;
  WorkHandle Reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
                    const CollectiveOptions& opts) override;
  WorkHandle AllToAll(const void* send, void* recv, size_t count_per_rank, DType dtype,
                      const CollectiveOptions& opts) override;
  WorkHandle Send(const void* buf, size_t count, DType dtype, int peer, int tag,
                  const CollectiveOptions& opts) override;
  WorkHandle Recv(void* buf, size_t count, DType dtype, int peer, int tag, const CollectiveOptions& opts) override;
  WorkHandle Barrier(const CollectiveOptions& opts) override;
  WorkHandle DeterministicAllreduceF32(const float* contributions, float* out, size_t count,
                                       int64_t total_contributions, const CollectiveOptions& opts) override;
  void Abort(const Status& reason) override;

  void ShutdownBeforeFinalize() override { Shutdown(); }

  // The MPI communicator collectives run on (for NativeMpiAllreduce).
  MPI_Comm mpi_comm() const { return comm_; }

  // Work::Wait: runs queued operations on the calling thread, up to and including `w`, if no
  // one else is executing; their waits end at `caller_deadline_ns` at the latest. False when
  // the executor was busy (the caller should wait for `w` instead).
  bool TryRunInline(MpiWork& w, int64_t caller_deadline_ns);

 private:
  MpiCommunicator(MPI_Comm comm, MPI_Comm p2p, std::shared_ptr<CommState> state, const MpiOptions& options);

  WorkHandle Issue(const CallDesc& d, const void* send, const void* recv, const CollectiveOptions& opts, bool eager,
                   RunFn run);
  void ProgressLoop();
  std::shared_ptr<MpiWork> PopFront();
  void Execute(MpiWork& w, int64_t caller_deadline_ns);
  Status CheckSameCall(ExecContext& ctx);
  Status RunRecv(ExecContext& ctx, void* buf, size_t bytes, int peer, int tag);
  // Tests staged sends; with `drain`, waits for each until its deadline.
  void ServiceSends(bool drain);
  void Shutdown();

  MPI_Comm comm_;      // collectives and lockstep's own point-to-point traffic
  MPI_Comm p2p_comm_;  // user Send/Recv
  const std::shared_ptr<CommState> state_;
  const MpiOptions options_;
  int tag_ub_ = 32767;
  uint64_t next_seq_ = 0;  // issuing thread only

  std::mutex mu_;  // guards the queue and the progress thread's sleep state
  std::condition_variable cv_;
  std::deque<std::shared_ptr<MpiWork>> queue_;
  int eager_pending_ = 0;
  bool idle_ = false;  // the progress thread sleeps with nothing to do: Issue must wake it
  bool stop_ = false;
  std::thread progress_;
  std::once_flag shutdown_once_;

  // Guarded by exec_mu_ (held by whoever executes).
  std::mutex exec_mu_;
  struct StagedSend {
    MPI_Request req;
    std::vector<unsigned char> bytes;
    int64_t deadline_ns;
  };
  std::list<StagedSend> staged_;
  std::atomic<bool> has_staged_{false};  // staged_ is not empty (read without exec_mu_)
  std::vector<unsigned char> scratch_;
};

}  // namespace lockstep::comm::mpi_detail
