// HierCommunicator: one local worker's end of a hierarchical communicator (hier_world.h):
// a threads communicator over the host's workers, an mpi communicator over the hosts for
// its local index, and a progress thread that runs its operations in issue order, each as
// a few steps on those two. Internal to comm/hier/.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "lockstep/comm/communicator.h"
#include "lockstep/comm/hier/host_context.h"

namespace lockstep::comm::hier_detail {

class HierCommunicator final : public Communicator {
 public:
  // `local`: this worker's threads communicator (size context->local_size()); `cross`: the
  // mpi communicator of the hosts' workers with this local index (size context->hosts()).
  HierCommunicator(std::shared_ptr<HostContext> context, std::shared_ptr<Communicator> local,
                   std::shared_ptr<Communicator> cross);
  ~HierCommunicator() override;

  int rank() const override { return host_ * local_size_ + local_rank_; }
  int size() const override { return hosts_ * local_size_; }
  const char* backend_name() const override { return "hier"; }

  Result<std::shared_ptr<Communicator>> Split(int color, int key, const CollectiveOptions& opts = {}) override;
  WorkHandle Allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                       const CollectiveOptions& opts = {}) override;
  WorkHandle ReduceScatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                           const CollectiveOptions& opts = {}) override;
  WorkHandle AllGather(const void* send, void* recv, size_t send_count, DType dtype,
                       const CollectiveOptions& opts = {}) override;
  WorkHandle Broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& opts = {}) override;
  WorkHandle Reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
                    const CollectiveOptions& opts = {}) override;
  WorkHandle AllToAll(const void* send, void* recv, size_t count_per_rank, DType dtype,
                      const CollectiveOptions& opts = {}) override;
  WorkHandle Send(const void* buf, size_t count, DType dtype, int peer, int tag,
                  const CollectiveOptions& opts = {}) override;
  WorkHandle Recv(void* buf, size_t count, DType dtype, int peer, int tag, const CollectiveOptions& opts = {}) override;
  WorkHandle Barrier(const CollectiveOptions& opts = {}) override;
  WorkHandle DeterministicAllreduceF32(const float* contributions, float* out, size_t count,
                                       int64_t total_contributions, const CollectiveOptions& opts = {}) override;
  void Abort(const Status& reason) override;

 private:
  class Task;
  // A step's options: the operation's algorithm hint and what is left of its deadline.
  struct Steps {
    CollectiveOptions opts;
    int64_t deadline_ns;
    CollectiveOptions Next() const;
  };
  using Body = std::function<Status(const Steps&)>;

  // Queues `body` behind the pending operations; its Work completes when it returned.
  WorkHandle Enqueue(const char* what, const CollectiveOptions& opts, Body body);
  void Loop();
  void Fail(const Status& reason);

  Status AllreduceBody(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, const Steps& s);
  Status ReduceScatterBody(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                           const Steps& s);
  Status AllGatherBody(const void* send, void* recv, size_t send_count, DType dtype, const Steps& s);
  // The channel's tag for a message from local index `from` to local index `to`.
  Result<int> ChannelTag(int tag, int from, int to) const;
  Status DeterministicBody(const float* contributions, float* out, size_t count, int64_t total, const Steps& s);

  const std::shared_ptr<HostContext> context_;
  const std::shared_ptr<Communicator> local_;
  const std::shared_ptr<Communicator> cross_;
  const int host_, hosts_, local_rank_, local_size_;
  // Set when the communicator fails or a wait expires: stops a receive on the channel.
  const std::shared_ptr<std::atomic<bool>> stop_ = std::make_shared<std::atomic<bool>>(false);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool stopping_ = false;
  Status poisoned_;  // ok until Abort or a failed operation
  std::thread thread_;
};

}  // namespace lockstep::comm::hier_detail
