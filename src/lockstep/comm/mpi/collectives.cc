#include "lockstep/comm/mpi/collectives.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lockstep/comm/mpi/mpi_env.h"
#include "lockstep/comm/mpi/pipeline.h"
#include "lockstep/comm/reduce_kernels.h"

namespace lockstep::comm::mpi_detail {
namespace {

CombineFn ReduceCombine(DType dtype, ReduceOp op, int n) {
  return [dtype, op, n](const void* const* inputs, void* out, size_t len) {
    void* outputs[1] = {out};
    ReduceRange(dtype, op, inputs, n, outputs, 1, 0, len, n);
  };
}

CombineFn TreeCombine(int n) {
  return [n](const void* const* inputs, void* out, size_t len) {
    DeterministicTreeSum(reinterpret_cast<const float* const*>(inputs), n, static_cast<float*>(out), len);
  };
}

// MPI counts are int: byte counts of native operations must fit.
Status CheckIntBytes(ExecContext& ctx, size_t bytes) {
  if (bytes <= static_cast<size_t>(INT_MAX)) return Status::Ok();
  return Status::Unimplemented("rank " + std::to_string(ctx.rank()) + ": " + CommState::Label(ctx.desc(), ctx.seq()) +
                               ": more than 2 GiB per rank in one call is not supported by the "
                               "mpi backend; split the call");
}

Status WaitOne(ExecContext& ctx, int rc, const char* call, MPI_Request* req) {
  LS_RETURN_IF_ERROR(ctx.Check(rc, call));
  return ctx.WaitAll(req, 1, nullptr, RequestKind::kCollective);
}

}  // namespace

size_t SegmentBytes() {
  static const size_t bytes = [] {
    const char* s = std::getenv("LOCKSTEP_MPI_SEGMENT_BYTES");
    long long v = s ? std::atoll(s) : 0;
    return v >= 64 ? static_cast<size_t>(v) : static_cast<size_t>(512 << 10);
  }();
  return bytes;
}

Status RunAllreduce(ExecContext& ctx, const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                    Algorithm algorithm) {
  const int n = ctx.size();
  const size_t es = DTypeSize(dtype);
  if (count == 0) return Status::Ok();
  if (n == 1) {
    ReduceCombine(dtype, op, 1)(&send, recv, count);
    return Status::Ok();
  }
  const bool small = count * es <= kSmallReduceBytes;
  if (algorithm == Algorithm::kDirect || (algorithm != Algorithm::kRing && small)) {
    LS_RETURN_IF_ERROR(CheckIntBytes(ctx, count * es));
    return GatherAndCombine(ctx, send, count, es, recv, ReduceCombine(dtype, op, n));
  }
  BlockLayout blocks = EvenBlocks(count, n);
  PipelineArgs a;
  a.send = send;
  a.blocks = &blocks;
  a.elem_size = es;
  a.reduced = static_cast<unsigned char*>(recv) + blocks.off[ctx.rank()] * es;
  a.gather_to = recv;
  a.combine = ReduceCombine(dtype, op, n);
  return PipelinedReduceScatter(ctx, a);
}

Status RunReduceScatter(ExecContext& ctx, const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op) {
  const int n = ctx.size();
  if (recv_count == 0) return Status::Ok();
  const size_t es = DTypeSize(dtype);
  const void* own = static_cast<const unsigned char*>(send) + ctx.rank() * recv_count * es;
  if (n == 1) {
    ReduceCombine(dtype, op, 1)(&own, recv, recv_count);
    return Status::Ok();
  }
  BlockLayout blocks = FixedBlocks(recv_count, n);
  PipelineArgs a;
  a.send = send;
  a.blocks = &blocks;
  a.elem_size = es;
  a.reduced = recv;
  a.combine = ReduceCombine(dtype, op, n);
  return PipelinedReduceScatter(ctx, a);
}

Status RunAllGather(ExecContext& ctx, const void* send, void* recv, size_t send_count, DType dtype) {
  const size_t bytes = send_count * DTypeSize(dtype);
  if (bytes == 0) return Status::Ok();
  LS_RETURN_IF_ERROR(CheckIntBytes(ctx, bytes));
  auto* mine = static_cast<unsigned char*>(recv) + static_cast<size_t>(ctx.rank()) * bytes;
  const bool in_place = send == mine;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Iallgather(in_place ? MPI_IN_PLACE : send, static_cast<int>(bytes), MPI_BYTE, recv,
                        static_cast<int>(bytes), MPI_BYTE, ctx.comm(), &req);
  }
  return WaitOne(ctx, rc, "MPI_Iallgather", &req);
}

Status RunBroadcast(ExecContext& ctx, void* buf, size_t count, DType dtype, int root) {
  const size_t bytes = count * DTypeSize(dtype);
  if (bytes == 0 || ctx.size() == 1) return Status::Ok();
  LS_RETURN_IF_ERROR(CheckIntBytes(ctx, bytes));
  MPI_Request req = MPI_REQUEST_NULL;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Ibcast(buf, static_cast<int>(bytes), MPI_BYTE, root, ctx.comm(), &req);
  }
  return WaitOne(ctx, rc, "MPI_Ibcast", &req);
}

Status RunReduce(ExecContext& ctx, const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root) {
  const int n = ctx.size(), me = ctx.rank();
  const size_t es = DTypeSize(dtype);
  if (count == 0) return Status::Ok();
  if (n == 1) {
    ReduceCombine(dtype, op, 1)(&send, recv, count);
    return Status::Ok();
  }
  // Reduce-scatter, then every rank sends its reduced block to the root.
  BlockLayout blocks = EvenBlocks(count, n);
  std::vector<unsigned char> own;
  unsigned char* reduced;
  if (me == root) {
    reduced = static_cast<unsigned char*>(recv) + blocks.off[me] * es;
  } else {
    own.resize(blocks.len[me] * es);
    reduced = own.data();
  }
  PipelineArgs a;
  a.send = send;
  a.blocks = &blocks;
  a.elem_size = es;
  a.reduced = reduced;
  a.combine = ReduceCombine(dtype, op, n);
  LS_RETURN_IF_ERROR(PipelinedReduceScatter(ctx, a));
  std::vector<MPI_Request> reqs;
  {
    MpiCallGuard guard;
    constexpr int kTagGatherToRoot = 3;
    if (me == root) {
      for (int p = 0; p < n; ++p) {
        if (p == me || blocks.len[p] == 0) continue;
        reqs.emplace_back();
        int rc = MPI_Irecv(static_cast<unsigned char*>(recv) + blocks.off[p] * es, static_cast<int>(blocks.len[p] * es),
                           MPI_BYTE, p, kTagGatherToRoot, ctx.comm(), &reqs.back());
        if (rc != MPI_SUCCESS) {
          reqs.pop_back();
          ctx.Abandon(reqs.data(), static_cast<int>(reqs.size()), RequestKind::kPointToPoint);
          return ctx.Check(rc, "MPI_Irecv");
        }
      }
    } else if (blocks.len[me] > 0) {
      reqs.emplace_back();
      int rc = MPI_Isend(reduced, static_cast<int>(blocks.len[me] * es), MPI_BYTE, root, kTagGatherToRoot, ctx.comm(),
                         &reqs.back());
      if (rc != MPI_SUCCESS) return ctx.Check(rc, "MPI_Isend");
    }
  }
  return ctx.WaitAll(reqs, RequestKind::kPointToPoint);
}

Status RunAllToAll(ExecContext& ctx, const void* send, void* recv, size_t count_per_rank, DType dtype) {
  const int n = ctx.size();
  const size_t bytes = count_per_rank * DTypeSize(dtype);
  if (bytes == 0) return Status::Ok();
  LS_RETURN_IF_ERROR(CheckIntBytes(ctx, bytes));
  if (n == 1) {
    if (send != recv) std::memcpy(recv, send, bytes);
    return Status::Ok();
  }
  // MPI_IN_PLACE all-to-all is not reliably supported by nonblocking implementations: stage.
  if (send == recv) {
    unsigned char* copy = ctx.Scratch(bytes * static_cast<size_t>(n));
    std::memcpy(copy, send, bytes * static_cast<size_t>(n));
    send = copy;
  }
  MPI_Request req = MPI_REQUEST_NULL;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Ialltoall(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, ctx.comm(),
                       &req);
  }
  return WaitOne(ctx, rc, "MPI_Ialltoall", &req);
}

Status RunBarrier(ExecContext& ctx) {
  if (ctx.size() == 1) return Status::Ok();
  MPI_Request req = MPI_REQUEST_NULL;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Ibarrier(ctx.comm(), &req);
  }
  return WaitOne(ctx, rc, "MPI_Ibarrier", &req);
}

Status RunDeterministicAllreduce(ExecContext& ctx, const float* contributions, float* out, size_t count,
                                 int64_t total_contributions) {
  const int n = ctx.size();
  if (count == 0) return Status::Ok();
  const int64_t local = total_contributions / n;
  std::vector<const float*> leaves(static_cast<size_t>(local));
  for (int64_t i = 0; i < local; ++i) leaves[i] = contributions + static_cast<size_t>(i) * count;
  if (n == 1) {
    DeterministicTreeSum(leaves.data(), local, out, count);
    return Status::Ok();
  }
  // This rank's complete subtree; then the fixed upper tree over the n partials.
  std::vector<float> partial(count);
  DeterministicTreeSum(leaves.data(), local, partial.data(), count);
  if (count * sizeof(float) <= kSmallReduceBytes) {
    return GatherAndCombine(ctx, partial.data(), count, sizeof(float), out, TreeCombine(n));
  }
  BlockLayout blocks = EvenBlocks(count, n);
  PipelineArgs a;
  a.send = partial.data();
  a.blocks = &blocks;
  a.elem_size = sizeof(float);
  a.reduced = out + blocks.off[ctx.rank()];
  a.gather_to = out;
  a.combine = TreeCombine(n);
  return PipelinedReduceScatter(ctx, a);
}

}  // namespace lockstep::comm::mpi_detail
