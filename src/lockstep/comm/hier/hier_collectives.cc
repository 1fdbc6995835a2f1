// The collectives of HierCommunicator as steps on the host's threads communicator (local) and
// the hosts' mpi communicator of this local index (cross). Notation: H hosts, L workers a
// host, this worker at (host h, local l), world rank h*L + l.
//
// Reductions run in two stages (inside the host, then across), so a float sum is rounded in a
// different order than on one flat backend (bits are fixed for a given H x L, as every
// backend's are for its world size); an average divides by L, then by H, which for integers
// truncates to the same value as dividing by H*L once. DeterministicAllreduceF32 keeps the
// exact bits of every other backend.
#include <cstring>
#include <vector>

#include "lockstep/comm/hier/hier_communicator.h"

namespace lockstep::comm::hier_detail {
namespace {

Status Done(const WorkHandle& w) { return w->Wait(); }

size_t Bytes(size_t count, DType dtype) { return count * static_cast<size_t>(DTypeSize(dtype)); }

}  // namespace

Status HierCommunicator::AllreduceBody(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                       const Steps& s) {
  if (count == 0) return Status::Ok();
  const size_t L = static_cast<size_t>(local_size_), l = static_cast<size_t>(local_rank_);
  const size_t chunk = (count + L - 1) / L;
  // Each local worker owns one chunk; a count that does not divide is padded in a copy.
  std::vector<unsigned char> padded;
  unsigned char* buf = static_cast<unsigned char*>(recv);
  if (count % L == 0) {
    LS_RETURN_IF_ERROR(Done(local_->ReduceScatter(send, buf + Bytes(l * chunk, dtype), chunk, dtype, op, s.Next())));
  } else {
    padded.assign(Bytes(L * chunk, dtype), 0);
    std::memcpy(padded.data(), send, Bytes(count, dtype));
    buf = padded.data();
    LS_RETURN_IF_ERROR(
        Done(local_->ReduceScatter(buf, buf + Bytes(l * chunk, dtype), chunk, dtype, op, s.Next())));
  }
  const size_t begin = std::min(count, l * chunk);
  const size_t mine = std::min(chunk, count - begin);  // the same on every host for this l
  if (mine > 0) {
    unsigned char* shard = buf + Bytes(begin, dtype);
    LS_RETURN_IF_ERROR(Done(cross_->Allreduce(shard, shard, mine, dtype, op, s.Next())));
  }
  LS_RETURN_IF_ERROR(Done(local_->AllGather(buf + Bytes(l * chunk, dtype), buf, chunk, dtype, s.Next())));
  if (!padded.empty()) std::memcpy(recv, padded.data(), Bytes(count, dtype));
  return Status::Ok();
}

// Block b of the world belongs to rank b = h'*L + l'. Inside the host the blocks are regrouped
// by local index ([l'][h']), so one local reduce-scatter leaves worker l the H blocks of its
// local index, summed over the host; the reduce-scatter across hosts finishes block (h, l).
Status HierCommunicator::ReduceScatterBody(const void* send, void* recv, size_t recv_count, DType dtype,
                                           ReduceOp op, const Steps& s) {
  if (recv_count == 0) return Status::Ok();
  const size_t H = static_cast<size_t>(hosts_), L = static_cast<size_t>(local_size_);
  const size_t block = Bytes(recv_count, dtype);
  std::vector<unsigned char> grouped(H * L * block);
  const auto* in = static_cast<const unsigned char*>(send);
  for (size_t lp = 0; lp < L; ++lp)
    for (size_t hp = 0; hp < H; ++hp) std::memcpy(&grouped[(lp * H + hp) * block], in + (hp * L + lp) * block, block);
  unsigned char* mine = &grouped[static_cast<size_t>(local_rank_) * H * block];
  LS_RETURN_IF_ERROR(Done(local_->ReduceScatter(grouped.data(), mine, H * recv_count, dtype, op, s.Next())));
  return Done(cross_->ReduceScatter(mine, recv, recv_count, dtype, op, s.Next()));
}

// The reverse of ReduceScatterBody: across hosts first (worker l gathers block (h', l) of every
// host), then inside the host, then back from [l'][h'] to world order.
Status HierCommunicator::AllGatherBody(const void* send, void* recv, size_t send_count, DType dtype,
                                       const Steps& s) {
  if (send_count == 0) return Status::Ok();
  const size_t H = static_cast<size_t>(hosts_), L = static_cast<size_t>(local_size_);
  const size_t block = Bytes(send_count, dtype);
  std::vector<unsigned char> grouped(H * L * block);
  unsigned char* mine = &grouped[static_cast<size_t>(local_rank_) * H * block];
  LS_RETURN_IF_ERROR(Done(cross_->AllGather(send, mine, send_count, dtype, s.Next())));
  LS_RETURN_IF_ERROR(Done(local_->AllGather(mine, grouped.data(), H * send_count, dtype, s.Next())));
  auto* out = static_cast<unsigned char*>(recv);
  for (size_t lp = 0; lp < L; ++lp)
    for (size_t hp = 0; hp < H; ++hp) std::memcpy(out + (hp * L + lp) * block, &grouped[(lp * H + hp) * block], block);
  return Status::Ok();
}

// The host's V/H contributions are a complete subtree of the fixed tree: the threads backend
// sums them (every local worker gets the host's partial); the H partials, one contribution a
// host, form the upper tree, each local worker summing its chunk of it across hosts.
Status HierCommunicator::DeterministicBody(const float* contributions, float* out, size_t count, int64_t total,
                                           const Steps& s) {
  if (count == 0) return Status::Ok();
  const size_t L = static_cast<size_t>(local_size_), l = static_cast<size_t>(local_rank_);
  const size_t chunk = (count + L - 1) / L;
  std::vector<float> partial(L * chunk, 0.0f);
  LS_RETURN_IF_ERROR(
      Done(local_->DeterministicAllreduceF32(contributions, partial.data(), count, total / hosts_, s.Next())));
  const size_t begin = std::min(count, l * chunk);
  const size_t mine = std::min(chunk, count - begin);
  if (mine > 0) {
    float* shard = partial.data() + begin;
    LS_RETURN_IF_ERROR(Done(cross_->DeterministicAllreduceF32(shard, shard, mine, hosts_, s.Next())));
  }
  LS_RETURN_IF_ERROR(Done(local_->AllGather(partial.data() + l * chunk, partial.data(), chunk, DType::kF32, s.Next())));
  std::memcpy(out, partial.data(), count * sizeof(float));
  return Status::Ok();
}

WorkHandle HierCommunicator::Allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                       const CollectiveOptions& opts) {
  return Enqueue("allreduce", opts,
                 [=, this](const Steps& s) { return AllreduceBody(send, recv, count, dtype, op, s); });
}

WorkHandle HierCommunicator::ReduceScatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                                           const CollectiveOptions& opts) {
  return Enqueue("reduce_scatter", opts,
                 [=, this](const Steps& s) { return ReduceScatterBody(send, recv, recv_count, dtype, op, s); });
}

WorkHandle HierCommunicator::AllGather(const void* send, void* recv, size_t send_count, DType dtype,
                                       const CollectiveOptions& opts) {
  return Enqueue("allgather", opts,
                 [=, this](const Steps& s) { return AllGatherBody(send, recv, send_count, dtype, s); });
}

WorkHandle HierCommunicator::Broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& opts) {
  if (root < 0 || root >= size())
    return CompletedWork(Status::InvalidArgument("hier: broadcast root " + std::to_string(root) + " out of range"));
  return Enqueue("broadcast", opts, [=, this](const Steps& s) -> Status {
    const int root_host = root / local_size_, root_local = root % local_size_;
    if (local_rank_ == root_local) LS_RETURN_IF_ERROR(Done(cross_->Broadcast(buf, count, dtype, root_host, s.Next())));
    return Done(local_->Broadcast(buf, count, dtype, root_local, s.Next()));
  });
}

WorkHandle HierCommunicator::Reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
                                    const CollectiveOptions& opts) {
  if (root < 0 || root >= size())
    return CompletedWork(Status::InvalidArgument("hier: reduce root " + std::to_string(root) + " out of range"));
  return Enqueue("reduce", opts, [=, this](const Steps& s) -> Status {
    const int root_host = root / local_size_, root_local = root % local_size_;
    std::vector<unsigned char> host_sum(local_rank_ == root_local ? Bytes(count, dtype) : 0);
    LS_RETURN_IF_ERROR(
        Done(local_->Reduce(send, host_sum.empty() ? nullptr : host_sum.data(), count, dtype, op, root_local, s.Next())));
    if (local_rank_ != root_local) return Status::Ok();
    return Done(cross_->Reduce(host_sum.data(), host_ == root_host ? recv : nullptr, count, dtype, op, root_host,
                               s.Next()));
  });
}

// Not used by the trainer: every rank's whole send buffer is gathered and the blocks picked.
WorkHandle HierCommunicator::AllToAll(const void* send, void* recv, size_t count_per_rank, DType dtype,
                                      const CollectiveOptions& opts) {
  return Enqueue("alltoall", opts, [=, this](const Steps& s) -> Status {
    const size_t n = static_cast<size_t>(size()), block = Bytes(count_per_rank, dtype);
    std::vector<unsigned char> all(n * n * block);
    LS_RETURN_IF_ERROR(AllGatherBody(send, all.data(), n * count_per_rank, dtype, s));
    auto* out = static_cast<unsigned char*>(recv);
    for (size_t p = 0; p < n; ++p)
      std::memcpy(out + p * block, &all[(p * n + static_cast<size_t>(rank())) * block], block);
    return Status::Ok();
  });
}

Result<int> HierCommunicator::ChannelTag(int tag, int from, int to) const {
  const int64_t l = local_size_;
  const int64_t combined = (static_cast<int64_t>(tag) * l + from) * l + to;
  if (tag < 0 || combined > context_->channel().tag_ub())
    return Status::InvalidArgument("hier: tag " + std::to_string(tag) + " is out of range with " +
                                   std::to_string(local_size_) + " workers a host");
  return static_cast<int>(combined);
}

// Inside a host: the threads backend; across hosts at the same local index: that index's mpi
// communicator; across hosts at different indexes: the host's channel, tagged with both.
WorkHandle HierCommunicator::Send(const void* buf, size_t count, DType dtype, int peer, int tag,
                                  const CollectiveOptions& opts) {
  if (peer < 0 || peer >= size() || peer == rank())
    return CompletedWork(Status::InvalidArgument("hier: send to rank " + std::to_string(peer)));
  const int peer_host = peer / local_size_, peer_local = peer % local_size_;
  Result<int> channel_tag = ChannelTag(tag, local_rank_, peer_local);
  if (!channel_tag.ok()) return CompletedWork(channel_tag.status());
  return Enqueue("send", opts, [=, this](const Steps& s) {
    if (peer_host == host_) return Done(local_->Send(buf, count, dtype, peer_local, tag, s.Next()));
    if (peer_local == local_rank_) return Done(cross_->Send(buf, count, dtype, peer_host, tag, s.Next()));
    return context_->channel().Send(buf, Bytes(count, dtype), peer_host, *channel_tag, s.deadline_ns);
  });
}

WorkHandle HierCommunicator::Recv(void* buf, size_t count, DType dtype, int peer, int tag,
                                  const CollectiveOptions& opts) {
  if (peer < 0 || peer >= size() || peer == rank())
    return CompletedWork(Status::InvalidArgument("hier: recv from rank " + std::to_string(peer)));
  const int peer_host = peer / local_size_, peer_local = peer % local_size_;
  Result<int> channel_tag = ChannelTag(tag, peer_local, local_rank_);
  if (!channel_tag.ok()) return CompletedWork(channel_tag.status());
  return Enqueue("recv", opts, [=, this](const Steps& s) {
    if (peer_host == host_) return Done(local_->Recv(buf, count, dtype, peer_local, tag, s.Next()));
    if (peer_local == local_rank_) return Done(cross_->Recv(buf, count, dtype, peer_host, tag, s.Next()));
    return context_->channel().Recv(buf, Bytes(count, dtype), peer_host, *channel_tag, s.deadline_ns, stop_.get());
  });
}

// After the local barrier every worker of this host has arrived; after the one across hosts
// (local index l of every host), every worker of every host has.
WorkHandle HierCommunicator::Barrier(const CollectiveOptions& opts) {
  return Enqueue("barrier", opts, [this](const Steps& s) -> Status {
    LS_RETURN_IF_ERROR(Done(local_->Barrier(s.Next())));
    return Done(cross_->Barrier(s.Next()));
  });
}

WorkHandle HierCommunicator::DeterministicAllreduceF32(const float* contributions, float* out, size_t count,
                                                       int64_t total_contributions, const CollectiveOptions& opts) {
  if (Status v = ValidateDeterministicContributions(total_contributions, size()); !v.ok()) return CompletedWork(v);
  return Enqueue("deterministic_allreduce", opts, [=, this](const Steps& s) {
    return DeterministicBody(contributions, out, count, total_contributions, s);
  });
}

}  // namespace lockstep::comm::hier_detail
