// The threads algorithms, run after commit: every rank's buffers are published in the Group
// and every rank is inside the same collective. Each algorithm ends with one Phase() (all
// ranks done reading and writing peers' buffers), so every rank runs the same number of
// phases and the buffers can be handed back to the callers.
#include <algorithm>
#include <cstring>
#include <utility>

#include "lockstep/comm/reduce_kernels.h"
#include "lockstep/comm/threads/comm_impl.h"
#include "lockstep/comm/threads/layout.h"

namespace lockstep::comm::threads {

// Small messages: every rank reduces the whole vector from everybody's send buffer (one
// sync, no writes to peers). Large: the vector is cut into blocks (ClaimBlockBytes), an
// equal run of them per rank; whoever claims a block (Group::claims: first the blocks of its
// own run, then those its peers have not reached yet) reduces it from everybody's send
// buffer and writes the result straight into everybody's recv buffer, i.e. reduce-scatter
// and all-gather fused into one pass: the ranks read N*S and write N*S bytes in all, the
// minimum. In place is safe: each block of every buffer is touched by one rank only, and
// ReduceRange reads an element from every input before it writes it to any output. Results
// are bit-identical whoever reduces a block.
void CommImpl::RunAllreduce(Op& op) {
  const size_t n = op.call.count, es = DTypeSize(op.call.dtype), bytes = n * es;
  const int world = size();
  if (n == 0) return;
  for (int p = 0; p < world; ++p) {
    const Published& peer = group_->pub(p, op.seq);
    in_ptrs_[p] = peer.send;
    out_ptrs_[p] = peer.recv;
  }
  if (UseDirectPath(op.call.algorithm, bytes)) {
    // Peers read our send buffer until the phase ends: an overlapping recv is written late.
    const bool staged = Overlap(op.send, bytes, op.recv, bytes);
    void* out = staged ? Scratch(bytes) : op.recv;
    ReduceRange(op.call.dtype, op.call.op, in_ptrs_.data(), world, &out, 1, 0, n, world);
    Phase();
    if (staged) std::memcpy(op.recv, out, bytes);
    return;
  }
  const BlockPlan plan = PlanBlocks(n, es, out_ptrs_[0], ClaimBlockBytes(bytes, world));
  const bool stream = StreamOutputs(bytes);  // each rank writes about S bytes in all
  group_->ForClaimedBlocks(op.seq, rank_, plan.blocks, [&](size_t j) {
    const Range block = plan.Block(j);
    ReduceRange(op.call.dtype, op.call.op, in_ptrs_.data(), world, out_ptrs_.data(), world, block.begin, block.end,
                world, stream);
  });
  Phase();  // publishes the blocks: streaming stores were fenced inside ReduceRange
}

void CommImpl::RunReduceScatter(Op& op) {
  const size_t rc = op.call.count, es = DTypeSize(op.call.dtype), block = rc * es;
  const int world = size();
  if (rc == 0) return;
  for (int p = 0; p < world; ++p) in_ptrs_[p] = Offset(group_->pub(p, op.seq).send, rank_ * block);
  // In place (NCCL style) recv is our own block, which only we read; anything else that
  // overlaps the send buffer is read by peers and is written after the phase.
  const bool staged = Overlap(op.recv, block, op.send, world * block) && op.recv != Offset(op.send, rank_ * block);
  void* out = staged ? Scratch(block) : op.recv;
  ReduceRange(op.call.dtype, op.call.op, in_ptrs_.data(), world, &out, 1, 0, rc, world);
  Phase();
  if (staged) std::memcpy(op.recv, out, block);
}

void CommImpl::RunAllGather(Op& op) {
  const size_t block = op.call.count * DTypeSize(op.call.dtype);
  if (block == 0) return;
  for (int p = 0; p < size(); ++p) {
    const void* src = group_->pub(p, op.seq).send;
    void* dst = Offset(op.recv, p * block);
    if (src != dst) std::memcpy(dst, src, block);
  }
  Phase();
}

void CommImpl::RunBroadcast(Op& op) {
  const size_t bytes = op.call.count * DTypeSize(op.call.dtype);
  if (bytes == 0) return;
  const void* src = group_->pub(op.call.root, op.seq).send;
  if (rank_ != op.call.root && src != op.recv) std::memcpy(op.recv, src, bytes);
  Phase();
}

void CommImpl::RunReduce(Op& op) {
  const size_t n = op.call.count, es = DTypeSize(op.call.dtype);
  const int world = size();
  if (n == 0) return;
  for (int p = 0; p < world; ++p) in_ptrs_[p] = group_->pub(p, op.seq).send;
  void* root_recv = group_->pub(op.call.root, op.seq).recv;
  if (UseDirectPath(op.call.algorithm, n * es)) {
    if (rank_ == op.call.root) {
      ReduceRange(op.call.dtype, op.call.op, in_ptrs_.data(), world, &root_recv, 1, 0, n, world);
    }
  } else {
    const Range mine = ChunkOf(n, world, rank_, es);
    ReduceRange(op.call.dtype, op.call.op, in_ptrs_.data(), world, &root_recv, 1, mine.begin, mine.end, world);
  }
  Phase();
}

void CommImpl::RunAllToAll(Op& op) {
  const size_t block = op.call.count * DTypeSize(op.call.dtype);
  if (block == 0) return;
  for (int p = 0; p < size(); ++p) {
    std::memcpy(Offset(op.recv, p * block), Offset(group_->pub(p, op.seq).send, rank_ * block), block);
  }
  Phase();
}

// The first member of each color (new rank 0) creates the subgroup's shared state and
// publishes it; the others pick it up after one phase; a second phase lets the leader drop
// its reference. Every rank runs both phases, members of no group included.
void CommImpl::RunSplit(Op& op) {
  const int color = op.split_color;
  std::vector<std::pair<int, int>> members;  // (key, parent rank)
  if (color >= 0) {
    for (int p = 0; p < size(); ++p) {
      const Published& peer = group_->pub(p, op.seq);
      if (peer.split_color == color) members.emplace_back(peer.split_key, p);
    }
    std::sort(members.begin(), members.end());
  }
  const bool leader = color >= 0 && members.front().second == rank_;
  Published& me = group_->pub(rank_, op.seq);
  if (leader) {
    me.split_group = std::make_shared<Group>(static_cast<int>(members.size()), group_->debug());
  }
  Phase();
  if (color >= 0) {
    int new_rank = 0;
    while (members[new_rank].second != rank_) ++new_rank;
    std::shared_ptr<Group> g = group_->pub(members.front().second, op.seq).split_group;
    op.split_result = NewThreadsCommunicator(std::move(g), new_rank);
  }
  Phase();
  if (leader) me.split_group.reset();
}

// The upper levels of the fixed tree: rank r combines chunk r of the N published partials
// (each a complete subtree over V/N contributions) and writes it to every rank's output.
void CommImpl::RunDeterministic(Op& op) {
  const size_t n = op.call.count;
  const int world = size();
  if (n == 0) return;
  std::vector<const float*> partials(world);
  constexpr size_t kBlock = 16384;
  std::vector<float> tmp(std::min(kBlock, n));
  const Range mine = ChunkOf(n, world, rank_, sizeof(float));
  for (size_t b = mine.begin; b < mine.end; b += kBlock) {
    const size_t len = std::min(kBlock, mine.end - b);
    for (int p = 0; p < world; ++p) {
      partials[p] = static_cast<const float*>(group_->pub(p, op.seq).send) + b;
    }
    DeterministicTreeSum(partials.data(), world, tmp.data(), len);
    for (int p = 0; p < world; ++p) {
      std::memcpy(static_cast<float*>(group_->pub(p, op.seq).recv) + b, tmp.data(), len * sizeof(float));
    }
  }
  Phase();
}

}  // namespace lockstep::comm::threads
