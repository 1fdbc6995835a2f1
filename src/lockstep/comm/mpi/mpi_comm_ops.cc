// The operations of MpiCommunicator: argument packing at issue, and what runs on the
// executor (point-to-point here, collectives in collectives.cc).
#include <climits>
#include <cstring>

#include "lockstep/comm/mpi/collectives.h"
#include "lockstep/comm/mpi/mpi_comm.h"

namespace lockstep::comm::mpi_detail {
namespace {

CallDesc Desc(OpKind kind, DType dtype, ReduceOp op, int root, size_t count, int64_t aux, Algorithm algorithm) {
  CallDesc d;
  d.kind = kind;
  d.dtype = dtype;
  d.op = op;
  d.root = root;
  d.count = count;
  d.aux = aux;
  d.algorithm = algorithm;
  return d;
}

// Large operations wake the progress thread at once (they are worth a hand-off and may be
// overlapped with compute); small ones are usually run by the caller's Wait.
bool Eager(size_t count, DType dtype) { return count * DTypeSize(dtype) > (64u << 10); }

}  // namespace

WorkHandle MpiCommunicator::Allreduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                      const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kAllreduce, dtype, op, -1, count, 0, opts.algorithm);
  return Issue(d, send, recv, opts, Eager(count, dtype),
               [=](ExecContext& ctx) { return RunAllreduce(ctx, send, recv, count, dtype, op, opts.algorithm); });
}

WorkHandle MpiCommunicator::ReduceScatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                                          const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kReduceScatter, dtype, op, -1, recv_count, 0, opts.algorithm);
  return Issue(d, send, recv, opts, Eager(recv_count * size(), dtype),
               [=](ExecContext& ctx) { return RunReduceScatter(ctx, send, recv, recv_count, dtype, op); });
}

WorkHandle MpiCommunicator::AllGather(const void* send, void* recv, size_t send_count, DType dtype,
                                      const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kAllGather, dtype, ReduceOp::kSum, -1, send_count, 0, opts.algorithm);
  return Issue(d, send, recv, opts, Eager(send_count * size(), dtype),
               [=](ExecContext& ctx) { return RunAllGather(ctx, send, recv, send_count, dtype); });
}

WorkHandle MpiCommunicator::Broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kBroadcast, dtype, ReduceOp::kSum, root, count, 0, opts.algorithm);
  return Issue(d, buf, buf, opts, Eager(count, dtype),
               [=](ExecContext& ctx) { return RunBroadcast(ctx, buf, count, dtype, root); });
}

WorkHandle MpiCommunicator::Reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
                                   const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kReduce, dtype, op, root, count, 0, opts.algorithm);
  return Issue(d, send, recv, opts, Eager(count, dtype),
               [=](ExecContext& ctx) { return RunReduce(ctx, send, recv, count, dtype, op, root); });
}

WorkHandle MpiCommunicator::AllToAll(const void* send, void* recv, size_t count_per_rank, DType dtype,
                                     const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kAllToAll, dtype, ReduceOp::kSum, -1, count_per_rank, 0, opts.algorithm);
  return Issue(d, send, recv, opts, Eager(count_per_rank * size(), dtype),
               [=](ExecContext& ctx) { return RunAllToAll(ctx, send, recv, count_per_rank, dtype); });
}

WorkHandle MpiCommunicator::Barrier(const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kBarrier, DType::kU8, ReduceOp::kSum, -1, 0, 0, opts.algorithm);
  return Issue(d, nullptr, nullptr, opts, false, [](ExecContext& ctx) { return RunBarrier(ctx); });
}

WorkHandle MpiCommunicator::DeterministicAllreduceF32(const float* contributions, float* out, size_t count,
                                                      int64_t total_contributions, const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kDeterministicAllreduce, DType::kF32, ReduceOp::kSum, -1, count, total_contributions,
                    opts.algorithm);
  return Issue(d, contributions, out, opts, Eager(count, DType::kF32), [=](ExecContext& ctx) {
    return RunDeterministicAllreduce(ctx, contributions, out, count, total_contributions);
  });
}

Result<std::shared_ptr<Communicator>> MpiCommunicator::Split(int color, int key, const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kSplit, DType::kU8, ReduceOp::kSum, -1, 0, 0, opts.algorithm);
  auto result = std::make_shared<std::shared_ptr<Communicator>>();
  const MpiOptions options = options_;
  WorkHandle w = Issue(d, nullptr, nullptr, opts, false, [=, this](ExecContext& ctx) -> Status {
    // MPI_Comm_split blocks until every rank calls it; an all-gather first makes the wait
    // for late ranks time out like any collective. Afterwards everybody is there.
    // [0, 2): this rank's (color, key); then every rank's. On the heap: kept if abandoned.
    auto buf = std::make_shared<std::vector<int>>(2 + 2 * static_cast<size_t>(ctx.size()));
    (*buf)[0] = color;
    (*buf)[1] = key;
    MPI_Request req = MPI_REQUEST_NULL;
    {
      MpiCallGuard guard;
      int rc = MPI_Iallgather(buf->data(), 2, MPI_INT, buf->data() + 2, 2, MPI_INT, comm_, &req);
      LS_RETURN_IF_ERROR(ctx.Check(rc, "MPI_Iallgather"));
    }
    if (Status waited = ctx.WaitAll(&req, 1, nullptr, RequestKind::kCollective); !waited.ok()) {
      KeepForever(buf);
      return waited;
    }
    MPI_Comm child = MPI_COMM_NULL;
    {
      MpiCallGuard guard;
      IgnoreMpiLeaks ignore;
      int rc = MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child);
      LS_RETURN_IF_ERROR(ctx.Check(rc, "MPI_Comm_split"));
    }
    if (child == MPI_COMM_NULL) return Status::Ok();  // color < 0: in no group
    LS_ASSIGN_OR_RETURN(auto c, MpiCommunicator::Create(child, options));
    *result = std::move(c);
    return Status::Ok();
  });
  LS_RETURN_IF_ERROR(w->Wait());
  return *result;
}

// ---- Point-to-point ----------------------------------------------------------------------

WorkHandle MpiCommunicator::Send(const void* buf, size_t count, DType dtype, int peer, int tag,
                                 const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kSend, dtype, ReduceOp::kSum, peer, count, tag, opts.algorithm);
  if (tag < 0 || tag > tag_ub_) {
    return CompletedWork(Status::InvalidArgument("rank " + std::to_string(rank()) + ": " + Describe(d) +
                                                 ": tag must be in [0, " + std::to_string(tag_ub_) + "]"));
  }
  const size_t bytes = count * DTypeSize(dtype);
  if (bytes > static_cast<size_t>(INT_MAX)) {
    return CompletedWork(Status::Unimplemented("send of more than 2 GiB: split the message"));
  }
  // Copy at issue: the caller may reuse the buffer as soon as Send is done, and a Send must
  // complete without the matching Recv.
  auto staged = std::make_shared<std::vector<unsigned char>>(bytes);
  if (bytes > 0) std::memcpy(staged->data(), buf, bytes);
  // Eager: the peer's Recv must not depend on this rank waiting for its Send.
  return Issue(d, buf, nullptr, opts, true, [=, this](ExecContext& ctx) {
    StagedSend s;
    s.bytes = std::move(*staged);
    s.deadline_ns = NowNanos() + static_cast<int64_t>(opts.timeout.count()) * 1'000'000;
    {
      MpiCallGuard guard;
      int rc = MPI_Isend(s.bytes.data(), static_cast<int>(bytes), MPI_BYTE, peer, tag, p2p_comm_, &s.req);
      LS_RETURN_IF_ERROR(ctx.Check(rc, "MPI_Isend"));
    }
    staged_.push_back(std::move(s));
    return Status::Ok();
  });
}

WorkHandle MpiCommunicator::Recv(void* buf, size_t count, DType dtype, int peer, int tag,
                                 const CollectiveOptions& opts) {
  CallDesc d = Desc(OpKind::kRecv, dtype, ReduceOp::kSum, peer, count, tag, opts.algorithm);
  if (tag < 0 || tag > tag_ub_) {
    return CompletedWork(Status::InvalidArgument("rank " + std::to_string(rank()) + ": " + Describe(d) +
                                                 ": tag must be in [0, " + std::to_string(tag_ub_) + "]"));
  }
  const size_t bytes = count * DTypeSize(dtype);
  if (bytes > static_cast<size_t>(INT_MAX)) {
    return CompletedWork(Status::Unimplemented("recv of more than 2 GiB: split the message"));
  }
  return Issue(d, nullptr, buf, opts, Eager(count, dtype), [=, this](ExecContext& ctx) -> Status {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Status st;
    st.MPI_ERROR = MPI_SUCCESS;
    {
      MpiCallGuard guard;
      int rc = MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, peer, tag, p2p_comm_, &req);
      LS_RETURN_IF_ERROR(ctx.Check(rc, "MPI_Irecv"));
    }
    Status s = ctx.WaitAll(&req, 1, &st, RequestKind::kPointToPoint);
    if (!s.ok()) {
      int error_class = 0;
      MPI_Error_class(st.MPI_ERROR, &error_class);
      if (s.code() == StatusCode::kInternal && error_class == MPI_ERR_TRUNCATE) {
        return Status::InvalidArgument("rank " + std::to_string(rank()) + ": " + CommState::Label(d, 0) +
                                       ": the matching send was longer");
      }
      return s;
    }
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (static_cast<size_t>(got) != bytes) {
      return Status::InvalidArgument("rank " + std::to_string(rank()) + ": " + CommState::Label(d, 0) +
                                     ": the matching send had " + std::to_string(got) + " bytes, expected " +
                                     std::to_string(bytes));
    }
    return Status::Ok();
  });
}

}  // namespace lockstep::comm::mpi_detail
