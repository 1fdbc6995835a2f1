// HostContext: what the local workers of one hierarchical communicator share inside their
// process: the host communicator (mpi, one rank per host process), their count, and the
// rendezvous that lets one of them make MPI calls for all (Split). Internal to comm/hier/.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/comm/mpi/mpi_channel.h"

namespace lockstep::comm::hier_detail {

class HostContext;

// What Split gives one local worker: where it lands, and the communicators made for it.
struct SplitPlan {
  Status status;             // an error for every worker when the groups cannot be split
  int color = -1;            // the caller's color (-1: in no group)
  int new_rank = 0;          // rank in the new group, by (key, parent rank)
  int group_hosts = 0;       // hosts the group spans
  int local_size = 0;        // its members on each of those hosts
  std::shared_ptr<Communicator> cross;          // group_hosts > 1: across hosts, this local index
  std::shared_ptr<HostContext> child_context;   // group_hosts > 1 and local_size > 1
};

class HostContext {
 public:
  // `channel`: over host_comm's ranks, for messages between workers at different local indexes.
  HostContext(std::shared_ptr<Communicator> host_comm, std::shared_ptr<MpiChannel> channel, int local_size)
      : host_comm_(std::move(host_comm)),
        channel_(std::move(channel)),
        local_size_(local_size),
        calls_(local_size),
        plans_(local_size) {}

  int host() const { return host_comm_->rank(); }
  int hosts() const { return host_comm_->size(); }
  int local_size() const { return local_size_; }
  MpiChannel& channel() const { return *channel_; }

  // Collective over the local workers of this context (each with its own local index), which
  // together with the other hosts' calls is Split over the whole hierarchical communicator.
  // The last worker to arrive gathers every worker's (color, key) across hosts and makes the
  // mpi communicators of the new groups, for all.
  SplitPlan PlanSplit(int local_rank, int color, int key, const CollectiveOptions& opts);

 private:
  struct Call {
    int color = -1;
    int key = 0;
  };
  // Each local worker calls it; the last to arrive runs `leader` and all return after it. Fails
  // with Timeout (and stays broken) when the others do not arrive by `deadline_ns`.
  Status Rendezvous(int64_t deadline_ns, const std::function<void()>& leader);
  void PlanAll(const CollectiveOptions& opts);

  std::shared_ptr<Communicator> host_comm_;
  std::shared_ptr<MpiChannel> channel_;
  const int local_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
  std::vector<Call> calls_;       // by local rank, written before the rendezvous
  std::vector<SplitPlan> plans_;  // by local rank, written by the leader
};

}  // namespace lockstep::comm::hier_detail
