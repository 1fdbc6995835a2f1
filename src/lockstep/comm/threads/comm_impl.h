// CommImpl: one rank's end of a threads communicator: its operation queue, its progress
// thread, and the collective algorithms over the shared Group. Internal to the backend.
//
// Execution model. Operations run one at a time in issue order, by whoever holds exec_mu_:
// the progress thread (true async progress, so collectives overlap the caller's compute), or
// the caller inside Work::Wait (no thread hand-off, which keeps small-message latency at a
// few microseconds). Large operations wake the progress thread at once; small ones leave it
// asleep (a wake-up is a system call and a context switch) and are picked up by the caller's
// Wait or, if nobody waits, by the progress thread's next poll within about a millisecond, so
// progress never depends on the caller waiting.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lockstep/comm/call_desc.h"
#include "lockstep/comm/communicator.h"
#include "lockstep/comm/threads/group.h"

namespace lockstep::comm::threads {

struct Op {
  CallDesc call;
  uint64_t seq = 0;  // collectives: 1, 2, ... per communicator; send/recv: 0
  CollectiveOptions opts;
  const void* send = nullptr;
  void* recv = nullptr;
  int split_color = -1;
  int split_key = 0;
  std::shared_ptr<Communicator> split_result;
  bool eager = false;  // wake the progress thread at once
  int64_t enqueue_ns = 0;
  WaitWord done;  // 0 -> 1 when finished; status is valid after that
  Status status;
};

class CommImpl : public std::enable_shared_from_this<CommImpl> {
 public:
  CommImpl(std::shared_ptr<Group> group, int rank);
  ~CommImpl();
  CommImpl(const CommImpl&) = delete;
  CommImpl& operator=(const CommImpl&) = delete;

  int rank() const { return rank_; }
  int size() const { return group_->size(); }
  const std::shared_ptr<Group>& group() const { return group_; }

  // Issuing side (the rank's thread). Assigns the sequence number of collectives.
  uint64_t NextSeq() { return ++next_seq_; }
  WorkHandle Enqueue(std::shared_ptr<Op> op);

  // Work side (any thread).
  Status WaitOp(const std::shared_ptr<Op>& op, std::chrono::milliseconds timeout);

  void Abort(const Status& reason);
  // Stops the progress thread; pending operations fail with Aborted. Idempotent.
  void Shutdown();

 private:
  // Queue and execution (comm_impl.cc).
  void ProgressLoop();
  std::shared_ptr<Op> PopFront();
  bool TryRunUntil(const Op& op, int64_t caller_deadline_ns);
  void Execute(Op& op, int64_t caller_deadline_ns);
  void Finish(Op& op, Status status);
  Status RunSend(Op& op);
  Status RunRecv(Op& op, int64_t deadline_ns);
  Status RunCollective(Op& op, int64_t deadline_ns);
  Status Commit(Op& op, int64_t deadline_ns, int64_t wait_start_ns);
  Status CheckSameCall(const Op& op);
  void Poison(const Status& status);
  Status FailedStatus(const Op& op);
  std::string OpLabel(const Op& op) const;

  // Algorithms (collectives.cc). Prepare runs before arrival and returns the pointer this
  // rank publishes as its send buffer; Run* run after commit.
  const void* PrepareSend(Op& op);
  void Phase();
  void RunAllreduce(Op& op);
  void RunReduceScatter(Op& op);
  void RunAllGather(Op& op);
  void RunBroadcast(Op& op);
  void RunReduce(Op& op);
  void RunAllToAll(Op& op);
  void RunSplit(Op& op);
  void RunDeterministic(Op& op);
  unsigned char* Scratch(size_t bytes);

  const std::shared_ptr<Group> group_;
  const int rank_;

  uint64_t next_seq_ = 0;  // issuing thread only

  // Executor state, guarded by exec_mu_.
  std::mutex exec_mu_;
  uint32_t phase_ = 0;
  std::vector<unsigned char> scratch_;
  std::vector<const void*> in_ptrs_;  // size() entries, one per rank
  std::vector<void*> out_ptrs_;

  std::mutex queue_mu_;
  std::deque<std::shared_ptr<Op>> queue_;
  int eager_pending_ = 0;
  bool idle_ = false;  // the progress thread sleeps with an empty queue: Enqueue must wake it
  bool stop_ = false;
  WaitWord queue_word_;
  std::thread progress_;

  mutable std::mutex failed_mu_;
  Status failed_;
  std::atomic<bool> failed_flag_{false};
};

// The public Communicator over one rank of `group` (threads_communicator.cc).
std::shared_ptr<Communicator> NewThreadsCommunicator(std::shared_ptr<Group> group, int rank);

}  // namespace lockstep::comm::threads
