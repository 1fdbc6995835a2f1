// CountingCommunicator: a Communicator that forwards every call to another one and counts the
// bytes this rank puts on its link, for the `comm_bytes` of each training row (DESIGN.md).
//
// Why a model and not the backend's own count: the threads backend moves data through shared
// memory and OpenMPI picks its algorithms at run time, so what a backend "sends" says little
// about a real network. The count is what the bandwidth-optimal (ring) algorithm of each
// operation sends from one rank, the figure nccl-tests' bus bandwidth and the planner also use:
//   allreduce (also deterministic)   2 (p-1)/p x bytes        reduce_scatter  (p-1) x recv bytes
//   all_gather                       (p-1) x send bytes        all_to_all     (p-1) x block bytes
//   broadcast, reduce                (p-1)/p x bytes           send           bytes (recv: 0)
// (p: the communicator's size; 0 when p = 1). Children made by Split count into the same
// counter, so one counter sums a rank's dp, tp and pp groups.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "lockstep/comm/communicator.h"

namespace lockstep::comm {

using ByteCounter = std::atomic<int64_t>;

class CountingCommunicator final : public Communicator {
 public:
  CountingCommunicator(std::shared_ptr<Communicator> inner, std::shared_ptr<ByteCounter> counter)
      : inner_(std::move(inner)), counter_(std::move(counter)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const char* backend_name() const override { return inner_->backend_name(); }

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
  void Abort(const Status& reason) override { inner_->Abort(reason); }

 private:
  // Adds bytes x numerator / denominator (in integers: the count stays exact for whole blocks).
  void Add(size_t count, DType dtype, int64_t numerator, int64_t denominator);

  std::shared_ptr<Communicator> inner_;
  std::shared_ptr<ByteCounter> counter_;
};

}  // namespace lockstep::comm
