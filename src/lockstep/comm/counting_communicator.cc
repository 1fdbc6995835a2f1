#include "lockstep/comm/counting_communicator.h"

namespace lockstep::comm {

void CountingCommunicator::Add(size_t count, DType dtype, int64_t numerator, int64_t denominator) {
  if (numerator == 0) return;
  const int64_t bytes = static_cast<int64_t>(count * DTypeSize(dtype));
  counter_->fetch_add(bytes * numerator / denominator, std::memory_order_relaxed);
}

Result<std::shared_ptr<Communicator>> CountingCommunicator::Split(int color, int key, const CollectiveOptions& opts) {
  LS_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> child, inner_->Split(color, key, opts));
  if (child == nullptr) return child;
  return std::shared_ptr<Communicator>(std::make_shared<CountingCommunicator>(std::move(child), counter_));
}

WorkHandle CountingCommunicator::Allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                           const CollectiveOptions& opts) {
  const int p = size();
  Add(count, dtype, 2 * (p - 1), p);
  return inner_->Allreduce(send, recv, count, dtype, op, opts);
}

WorkHandle CountingCommunicator::ReduceScatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                               ReduceOp op, const CollectiveOptions& opts) {
  Add(recv_count, dtype, size() - 1, 1);
  return inner_->ReduceScatter(send, recv, recv_count, dtype, op, opts);
}

WorkHandle CountingCommunicator::AllGather(const void* send, void* recv, size_t send_count, DType dtype,
                                           const CollectiveOptions& opts) {
  Add(send_count, dtype, size() - 1, 1);
  return inner_->AllGather(send, recv, send_count, dtype, opts);
}

WorkHandle CountingCommunicator::Broadcast(void* buf, size_t count, DType dtype, int root,
                                           const CollectiveOptions& opts) {
  Add(count, dtype, size() - 1, size());
  return inner_->Broadcast(buf, count, dtype, root, opts);
}

WorkHandle CountingCommunicator::Reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
                                        const CollectiveOptions& opts) {
  Add(count, dtype, size() - 1, size());
  return inner_->Reduce(send, recv, count, dtype, op, root, opts);
}

WorkHandle CountingCommunicator::AllToAll(const void* send, void* recv, size_t count_per_rank, DType dtype,
                                          const CollectiveOptions& opts) {
  Add(count_per_rank, dtype, size() - 1, 1);
  return inner_->AllToAll(send, recv, count_per_rank, dtype, opts);
}

WorkHandle CountingCommunicator::Send(const void* buf, size_t count, DType dtype, int peer, int tag,
                                      const CollectiveOptions& opts) {
  Add(count, dtype, 1, 1);
  return inner_->Send(buf, count, dtype, peer, tag, opts);
}

WorkHandle CountingCommunicator::Recv(void* buf, size_t count, DType dtype, int peer, int tag,
                                      const CollectiveOptions& opts) {
  return inner_->Recv(buf, count, dtype, peer, tag, opts);
}

WorkHandle CountingCommunicator::Barrier(const CollectiveOptions& opts) { return inner_->Barrier(opts); }

WorkHandle CountingCommunicator::DeterministicAllreduceF32(const float* contributions, float* out, size_t count,
                                                           int64_t total_contributions,
                                                           const CollectiveOptions& opts) {
  const int p = size();
  Add(count, DType::kF32, 2 * (p - 1), p);
  return inner_->DeterministicAllreduceF32(contributions, out, count, total_contributions, opts);
}

}  // namespace lockstep::comm
