// The frame every threads collective runs in: prepare, publish, arrive (with timeout), check
// that all ranks called the same collective, then the algorithm (collectives.cc).
#include <cstring>

#include "lockstep/comm/threads/comm_impl.h"
#include "lockstep/comm/threads/layout.h"
#include "lockstep/core/log.h"

namespace lockstep::comm::threads {

unsigned char* CommImpl::Scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void CommImpl::Phase() {
  ++phase_;
  group_->Signal(rank_, phase_);
  group_->WaitAll(rank_, phase_);
}

const void* CommImpl::PrepareSend(Op& op) {
  const size_t es = DTypeSize(op.call.dtype);
  const size_t n = op.call.count;
  const size_t world = static_cast<size_t>(size());
  auto stage = [&](size_t bytes) -> const void* {
    unsigned char* p = Scratch(bytes);
    std::memcpy(p, op.send, bytes);
    return p;
  };
  switch (op.call.kind) {
    case OpKind::kAllreduce:
      if (!UseDirectPath(op.call.algorithm, n * es) && op.send != op.recv &&
          Overlap(op.send, n * es, op.recv, n * es)) {
        return stage(n * es);
      }
      return op.send;
    case OpKind::kAllGather:
      if (Overlap(op.send, n * es, op.recv, world * n * es) && op.send != Offset(op.recv, rank_ * n * es)) {
        return stage(n * es);
      }
      return op.send;
    case OpKind::kReduce:
      if (rank_ == op.call.root && op.send != op.recv && Overlap(op.send, n * es, op.recv, n * es))
        return stage(n * es);
      return op.send;
    case OpKind::kAllToAll:
      if (Overlap(op.send, world * n * es, op.recv, world * n * es)) return stage(world * n * es);
      return op.send;
    case OpKind::kBroadcast:
      return op.recv;
    case OpKind::kDeterministicAllreduce: {
      const int64_t local = op.call.aux / size();
      const float* contributions = static_cast<const float*>(op.send);
      if (local == 1) {
        if (op.send != op.recv && Overlap(op.send, n * 4, op.recv, n * 4)) return stage(n * 4);
        return op.send;
      }
      // This rank's contributions are one complete subtree: reduce them locally first.
      float* partial = reinterpret_cast<float*>(Scratch(n * 4));
      std::vector<const float*> inputs(static_cast<size_t>(local));
      for (int64_t k = 0; k < local; ++k) inputs[k] = contributions + k * n;
      DeterministicTreeSum(inputs.data(), local, partial, n);
      return partial;
    }
    default:
      return op.send;
  }
}

Status CommImpl::RunCollective(Op& op, int64_t deadline_ns) {
  const void* send = PrepareSend(op);
  group_->claims(op.seq, rank_).store(0, std::memory_order_relaxed);  // see Group::claims
  Published& me = group_->pub(rank_, op.seq);
  me.call = op.call;
  me.send = send;
  me.recv = op.recv;
  me.split_color = op.split_color;
  me.split_key = op.split_key;
  LS_RETURN_IF_ERROR(Commit(op, deadline_ns, NowNanos()));
  LS_RETURN_IF_ERROR(CheckSameCall(op));
  switch (op.call.kind) {
    case OpKind::kAllreduce:
      RunAllreduce(op);
      break;
    case OpKind::kReduceScatter:
      RunReduceScatter(op);
      break;
    case OpKind::kAllGather:
      RunAllGather(op);
      break;
    case OpKind::kBroadcast:
      RunBroadcast(op);
      break;
    case OpKind::kReduce:
      RunReduce(op);
      break;
    case OpKind::kAllToAll:
      RunAllToAll(op);
      break;
    case OpKind::kSplit:
      RunSplit(op);
      break;
    case OpKind::kDeterministicAllreduce:
      RunDeterministic(op);
      break;
    case OpKind::kBarrier:
      break;  // the commit itself is the barrier
    case OpKind::kSend:
    case OpKind::kRecv:
      return Status::Internal("p2p op in RunCollective");
  }
  return Status::Ok();
}

Status CommImpl::Commit(Op& op, int64_t deadline_ns, int64_t wait_start_ns) {
  auto timeout_status = [&] {
    return Status::Timeout(TimeoutMessage(rank_, op.call, op.seq, std::chrono::nanoseconds(NowNanos() - wait_start_ns),
                                          group_->MissingRanks(op.seq)));
  };
  // A peer that timed out on this very collective makes it a timeout here too; anything
  // else (an earlier failure, Abort(), a desync) is reported as Aborted with its reason.
  auto aborted_status = [&](bool arrived) {
    auto [reason, seq] = group_->abort_status();
    if (arrived && reason.code() == StatusCode::kTimeout && seq == op.seq) {
      return timeout_status();
    }
    return Status::Aborted("rank " + std::to_string(rank_) + ": " + OpLabel(op) + " aborted: " + reason.message());
  };
  bool aborted_before = false;
  if (group_->Arrive(rank_, op.seq, &aborted_before)) return Status::Ok();
  Status failure;
  if (aborted_before) {
    failure = aborted_status(false);
  } else {
    while (failure.ok()) {
      ArriveOutcome outcome = group_->WaitCommitted(op.seq, deadline_ns);
      if (outcome == ArriveOutcome::kCommitted) return Status::Ok();
      if (outcome == ArriveOutcome::kAborted) {
        failure = aborted_status(true);
      } else {
        Status s = timeout_status();
        if (group_->TryAbortUncommitted(op.seq, s)) failure = s;
        // else: the last rank arrived just now; run the collective after all.
      }
    }
  }
  if (failure.code() == StatusCode::kTimeout) {
    LS_LOG(ERROR) << failure.message();
  }
  Poison(failure);
  return failure;
}

namespace {

// What the threads backend must agree on to be memory-safe (and, in debug mode, the op).
bool Compatible(const CallDesc& a, const CallDesc& b, bool debug) {
  if (a.kind != b.kind || a.count != b.count || a.dtype != b.dtype || a.root != b.root || a.aux != b.aux ||
      a.algorithm != b.algorithm) {
    return false;
  }
  return !debug || SameCall(a, b);
}

}  // namespace

Status CommImpl::CheckSameCall(const Op& op) {
  const int n = size();
  bool same = true;
  for (int p = 0; p < n && same; ++p) {
    same = Compatible(group_->pub(p, op.seq).call, op.call, group_->debug());
  }
  if (same) return Status::Ok();
  std::vector<CallDesc> calls(n);
  for (int p = 0; p < n; ++p) calls[p] = group_->pub(p, op.seq).call;
  Status s = Status::Aborted(DesyncMessage(op.seq, calls));
  LS_LOG(ERROR) << "rank " << rank_ << ": " << s.message();
  Poison(s);
  group_->Abort(s, op.seq);
  return s;
}

}  // namespace lockstep::comm::threads
