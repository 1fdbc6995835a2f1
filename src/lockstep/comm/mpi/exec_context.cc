#include "lockstep/comm/mpi/exec_context.h"

#include <sched.h>
#include <time.h>

#include <chrono>
#include <vector>

#include "lockstep/comm/mpi/mpi_env.h"

namespace lockstep::comm::mpi_detail {

void CommState::Poison(const Status& reason) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (poisoned_.load(std::memory_order_relaxed)) return;
    reason_ = reason.ok() ? Status::Aborted("aborted") : reason;
    poisoned_.store(true, std::memory_order_release);
  }
  board_->Poison(reason.message());
}

Status CommState::poison_reason() const {
  std::lock_guard<std::mutex> lk(mu_);
  return reason_;
}

std::string CommState::Label(const CallDesc& d, uint64_t seq) {
  std::string dims = "count=" + std::to_string(d.count) + ", dtype=" + DTypeName(d.dtype);
  if (d.kind == OpKind::kSend || d.kind == OpKind::kRecv) {
    return std::string(OpKindName(d.kind)) + (d.kind == OpKind::kRecv ? " from rank " : " to rank ") +
           std::to_string(d.root) + " (tag=" + std::to_string(d.aux) + ", " + dims + ")";
  }
  return std::string("collective ") + OpKindName(d.kind) + " #" + std::to_string(seq) + " (" + dims + ")";
}

Status CommState::AbortedStatus(const CallDesc& d, uint64_t seq) const {
  return Status::Aborted("rank " + std::to_string(rank_) + ": " + Label(d, seq) +
                         " not completed: communicator aborted: " + poison_reason().message());
}

Status ExecContext::Check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  return Status::Internal("rank " + std::to_string(rank()) + ": " + CommState::Label(desc_, seq_) + ": " + call +
                          " failed: " + MpiErrorString(rc));
}

unsigned char* ExecContext::Scratch(size_t bytes) {
  if (scratch_->size() < bytes) {
    scratch_->clear();
    scratch_->shrink_to_fit();
    scratch_->resize(bytes);
  }
  return scratch_->data();
}

Status ExecContext::TimeoutStatus(int64_t now_ns) {
  auto waited = std::chrono::nanoseconds(now_ns - start_ns_);
  if (desc_.kind == OpKind::kSend || desc_.kind == OpKind::kRecv) {
    return Status::Timeout(P2PTimeoutMessage(rank(), desc_, waited));
  }
  std::vector<int> missing = state_.board().RanksBefore(seq_);
  return Status::Timeout(TimeoutMessage(rank(), desc_, seq_, waited, missing));
}

Status ExecContext::CheckProgress(int64_t now_ns) {
  if (state_.poisoned()) return state_.AbortedStatus(desc_, seq_);
  if (state_.board().AnyPeerPoisoned()) {
    auto peer = state_.board().PoisonedPeer();
    if (peer) {
      return Status::Aborted("rank " + std::to_string(rank()) + ": " + CommState::Label(desc_, seq_) +
                             " aborted: rank " + std::to_string(peer->first) + " failed: " + peer->second);
    }
  }
  if (now_ns > deadline_ns_) return TimeoutStatus(now_ns);
  return Status::Ok();
}

Status ExecContext::WaitAll(MPI_Request* reqs, int n, MPI_Status* statuses, RequestKind kind, int64_t abort_grace_ns) {
  if (n == 0) return Status::Ok();
  // Statuses are needed to explain a failed request (MPI_ERR_IN_STATUS).
  MPI_Status local[8];
  std::vector<MPI_Status> heap;
  if (statuses == nullptr) {
    if (n <= 8) {
      statuses = local;
    } else {
      heap.resize(static_cast<size_t>(n));
      statuses = heap.data();
    }
  }
  const int64_t t0 = NowNanos();
  int64_t aborted_at = 0;
  for (uint32_t iter = 0;; ++iter) {
    int flag = 0;
    int rc;
    {
      MpiCallGuard guard;
      rc = MPI_Testall(n, reqs, &flag, statuses);
    }
    if (rc != MPI_SUCCESS) {
      if (rc == MPI_ERR_IN_STATUS) {
        for (int i = 0; i < n; ++i) {
          int e = statuses[i].MPI_ERROR;
          if (e != MPI_SUCCESS && e != MPI_ERR_PENDING) {
            rc = e;
            break;
          }
        }
      }
      Abandon(reqs, n, kind);
      return Check(rc, "MPI_Testall");
    }
    if (flag) return Status::Ok();
    if ((iter & 15) != 15) continue;
    const int64_t now = NowNanos();
    Status s = CheckProgress(now);
    if (!s.ok()) {
      if (s.code() == StatusCode::kAborted && abort_grace_ns > 0) {
        if (aborted_at == 0) aborted_at = now;
        if (now - aborted_at < abort_grace_ns && now <= deadline_ns_) continue;
      }
      Abandon(reqs, n, kind);
      return s;
    }
    // Spin first (latency), then share the core (two ranks per core is common here), then
    // doze: a long wait is a slow peer, and burning its CPU would slow it down further.
    const int64_t waited = now - t0;
    if (waited > 20'000'000) {
      timespec ts{0, 50'000};
      nanosleep(&ts, nullptr);
    } else if (waited > 5'000) {
      sched_yield();  // cheap when nobody else wants the core
    }
  }
}

void ExecContext::Abandon(MPI_Request* reqs, int n, RequestKind kind) {
  MpiCallGuard guard;
  int left = 0;
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    if (kind == RequestKind::kPointToPoint) {
      MPI_Cancel(&reqs[i]);
      // A cancelled receive that never matched completes at once; one already matched (a
      // transfer in progress) or a send may not, and is left behind.
      int flag = 0;
      for (int k = 0; k < 1000 && !flag; ++k) MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
      if (flag) continue;
    }
    ++left;
  }
  if (left > 0) NoteAbandonedRequests(left);
}

}  // namespace lockstep::comm::mpi_detail
