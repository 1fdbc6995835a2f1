// The public face of the threads backend: argument checks, sequence numbers, and the
// translation of each call into an Op for the rank's CommImpl.
#include <algorithm>

#include "lockstep/comm/call_desc.h"
#include "lockstep/comm/threads/comm_impl.h"
#include "lockstep/comm/threads/layout.h"
#include "lockstep/comm/threads/threads_world.h"

namespace lockstep::comm {
namespace threads {
namespace {

class ThreadsCommunicator final : public Communicator {
 public:
  explicit ThreadsCommunicator(std::shared_ptr<CommImpl> impl) : impl_(std::move(impl)) {}
  ~ThreadsCommunicator() override { impl_->Shutdown(); }

  int rank() const override { return impl_->rank(); }
  int size() const override { return impl_->size(); }
  const char* backend_name() const override { return "threads"; }

  Result<std::shared_ptr<Communicator>> Split(int color, int key, const CollectiveOptions& opts) override {
    CallDesc d;
    d.kind = OpKind::kSplit;
    auto op = NewOp(d, nullptr, nullptr, opts);
    op->split_color = color < 0 ? -1 : color;
    op->split_key = key;
    Status s = impl_->Enqueue(op)->Wait();
    if (!s.ok()) return s;
    return op->split_result;
  }

  WorkHandle Allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                       const CollectiveOptions& opts) override {
    return Issue(Desc(OpKind::kAllreduce, count, dtype, op), send, recv, opts, count);
  }
  WorkHandle ReduceScatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                           const CollectiveOptions& opts) override {
    return Issue(Desc(OpKind::kReduceScatter, recv_count, dtype, op), send, recv, opts, recv_count * size());
  }
  WorkHandle AllGather(const void* send, void* recv, size_t send_count, DType dtype,
                       const CollectiveOptions& opts) override {
    return Issue(Desc(OpKind::kAllGather, send_count, dtype), send, recv, opts, send_count * size());
  }
  WorkHandle Broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& opts) override {
    CallDesc d = Desc(OpKind::kBroadcast, count, dtype);
    d.root = root;
    return Issue(d, buf, buf, opts, count);
  }
  WorkHandle Reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
                    const CollectiveOptions& opts) override {
    CallDesc d = Desc(OpKind::kReduce, count, dtype, op);
    d.root = root;
    return Issue(d, send, recv, opts, count);
  }
  WorkHandle AllToAll(const void* send, void* recv, size_t count_per_rank, DType dtype,
                      const CollectiveOptions& opts) override {
    return Issue(Desc(OpKind::kAllToAll, count_per_rank, dtype), send, recv, opts, count_per_rank * size());
  }
  WorkHandle Send(const void* buf, size_t count, DType dtype, int peer, int tag,
                  const CollectiveOptions& opts) override {
    CallDesc d = Desc(OpKind::kSend, count, dtype);
    d.root = peer;
    d.aux = tag;
    return Issue(d, buf, nullptr, opts, count);
  }
  WorkHandle Recv(void* buf, size_t count, DType dtype, int peer, int tag, const CollectiveOptions& opts) override {
    CallDesc d = Desc(OpKind::kRecv, count, dtype);
    d.root = peer;
    d.aux = tag;
    return Issue(d, nullptr, buf, opts, count);
  }
  WorkHandle Barrier(const CollectiveOptions& opts) override {
    return Issue(Desc(OpKind::kBarrier, 0, DType::kU8), nullptr, nullptr, opts, 0);
  }
  WorkHandle DeterministicAllreduceF32(const float* contributions, float* out, size_t count,
                                       int64_t total_contributions, const CollectiveOptions& opts) override {
    CallDesc d = Desc(OpKind::kDeterministicAllreduce, count, DType::kF32, ReduceOp::kSum);
    d.aux = total_contributions;
    const int64_t local = total_contributions > 0 ? total_contributions / size() : 0;
    return Issue(d, contributions, out, opts, count * static_cast<size_t>(std::max<int64_t>(local, 1)));
  }

  void Abort(const Status& reason) override { impl_->Abort(reason); }

 private:
  static CallDesc Desc(OpKind kind, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum) {
    CallDesc d;
    d.kind = kind;
    d.count = count;
    d.dtype = dtype;
    d.op = op;
    return d;
  }

  std::shared_ptr<Op> NewOp(CallDesc d, const void* send, void* recv, const CollectiveOptions& opts) {
    d.algorithm = opts.algorithm;
    auto op = std::make_shared<Op>();
    op->call = d;
    op->opts = opts;
    op->send = send;
    op->recv = recv;
    if (d.kind != OpKind::kSend && d.kind != OpKind::kRecv) op->seq = impl_->NextSeq();
    return op;
  }

  // `elements` is the largest buffer the call touches, in elements of d.dtype.
  WorkHandle Issue(CallDesc d, const void* send, void* recv, const CollectiveOptions& opts, size_t elements) {
    d.algorithm = opts.algorithm;
    Status valid = ValidateCall(d, rank(), size(), send, recv);
    if (!valid.ok()) return CompletedWork(valid);
    auto op = NewOp(d, send, recv, opts);
    op->eager = elements * DTypeSize(d.dtype) >= kEagerBytes;
    return impl_->Enqueue(std::move(op));
  }

  std::shared_ptr<CommImpl> impl_;
};

}  // namespace

std::shared_ptr<Communicator> NewThreadsCommunicator(std::shared_ptr<Group> group, int rank) {
  return std::make_shared<ThreadsCommunicator>(std::make_shared<CommImpl>(std::move(group), rank));
}

}  // namespace threads

Result<std::unique_ptr<ThreadsWorld>> ThreadsWorld::Create(int world_size, const ThreadsWorldOptions& options) {
  if (world_size < 1 || world_size > kMaxSize) {
    return Status::InvalidArgument("threads world size must be in [1, " + std::to_string(kMaxSize) + "], got " +
                                   std::to_string(world_size));
  }
  return std::make_unique<ThreadsWorld>(world_size, options);
}

ThreadsWorld::ThreadsWorld(int world_size, const ThreadsWorldOptions& options) {
  const int n = std::clamp(world_size, 1, kMaxSize);
  auto group = std::make_shared<threads::Group>(n, options.debug_collectives);
  ranks_.reserve(n);
  for (int r = 0; r < n; ++r) ranks_.push_back(threads::NewThreadsCommunicator(group, r));
}

ThreadsWorld::~ThreadsWorld() = default;

std::shared_ptr<Communicator> ThreadsWorld::Rank(int r) const {
  if (r < 0 || r >= size()) return nullptr;
  return ranks_[r];
}

std::vector<std::shared_ptr<Communicator>> CreateThreadsGroup(int n, const ThreadsWorldOptions& options) {
  ThreadsWorld world(n, options);
  std::vector<std::shared_ptr<Communicator>> comms;
  for (int r = 0; r < world.size(); ++r) comms.push_back(world.Rank(r));
  return comms;
}

}  // namespace lockstep::comm
