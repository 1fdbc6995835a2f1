#include "lockstep/comm/mpi/mpi_comm.h"

#include <cstring>
#include <memory>
#include <vector>

#include "lockstep/comm/mpi/collectives.h"
#include "lockstep/core/clock.h"
#include "lockstep/core/log.h"

namespace lockstep::comm::mpi_detail {
namespace {

bool IsP2P(const CallDesc& d) { return d.kind == OpKind::kSend || d.kind == OpKind::kRecv; }

constexpr int64_t kLazyPickupNs = 500'000;  // an unwaited small op waits at most this
constexpr int64_t kPollNs = 1'000'000;      // progress thread poll while sends are staged
constexpr int64_t kWaitSliceNs = 200'000;  // Wait() retries running inline this often

int64_t ToNanos(std::chrono::milliseconds ms) {
  // Clamp: a huge timeout must not overflow the deadline.
  return ms.count() > (int64_t{1} << 40) ? (int64_t{1} << 60) : ms.count() * 1'000'000;
}

}  // namespace

// ---- Work ----------------------------------------------------------------------------------

void MpiWork::Finish(Status status) {
  run = nullptr;  // drop captured state on the executor
  {
    std::lock_guard<std::mutex> lk(mu_);
    status_ = std::move(status);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

Status MpiWork::Wait(std::chrono::milliseconds timeout) {
  const int64_t start = NowNanos();
  const int64_t deadline = start + ToNanos(timeout);
  for (;;) {
    if (Done()) break;
    if (auto comm = comm_.lock()) comm->TryRunInline(*this, deadline);
    if (Done()) break;
    // The executor is busy with this or an earlier operation: wait, retrying now and then
    // (it may finish its batch just before this operation was queued).
    const int64_t now = NowNanos();
    if (now >= deadline) break;
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::nanoseconds(std::min(kWaitSliceNs, deadline - now)),
                 [&] { return done_.load(std::memory_order_acquire); });
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (done_.load(std::memory_order_acquire)) return status_;
  }
  // Expired: the communicator is aborted (gloo semantics), which makes the executor abandon
  // this operation promptly; wait for that so the buffers are released when we return.
  auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout);
  Status expired =
      IsP2P(desc)
          ? Status::Timeout(P2PTimeoutMessage(state_->rank(), desc, waited))
          : Status::Timeout(TimeoutMessage(state_->rank(), desc, seq, waited, state_->board().RanksBefore(seq)));
  const bool first = !state_->poisoned();
  if (first) {
    LS_LOG(ERROR) << expired.message();
  }
  state_->Poison(expired);
  if (auto comm = comm_.lock()) comm->TryRunInline(*this, NowNanos());  // fail it if queued
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return done_.load(std::memory_order_acquire); });
  if (status_.ok() || status_.code() == StatusCode::kTimeout || !first) return status_;
  return expired;
}

// ---- Communicator: creation and life cycle ---------------------------------------------

Result<std::shared_ptr<MpiCommunicator>> MpiCommunicator::Create(MPI_Comm comm, const MpiOptions& options) {
  int rank = 0, size = 1, flag = 0;
  int* tag_ub = nullptr;
  MPI_Comm p2p = MPI_COMM_NULL;
  {
    MpiCallGuard guard;
    IgnoreMpiLeaks ignore;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int rc = MPI_Comm_dup(comm, &p2p);
    if (rc != MPI_SUCCESS) {
      MPI_Comm_free(&comm);
      return Status::Internal("MPI_Comm_dup failed: " + MpiErrorString(rc));
    }
    MPI_Comm_set_errhandler(p2p, MPI_ERRORS_RETURN);
    MPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &flag);
  }
  auto state = std::make_shared<CommState>(rank, size, StatusBoard::Create(comm, rank, size));
  std::shared_ptr<MpiCommunicator> c(new MpiCommunicator(comm, p2p, std::move(state), options));
  if (flag && tag_ub != nullptr) c->tag_ub_ = *tag_ub;
  return c;
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, MPI_Comm p2p, std::shared_ptr<CommState> state,
                                 const MpiOptions& options)
    : comm_(comm), p2p_comm_(p2p), state_(std::move(state)), options_(options) {
  progress_ = std::thread([this] { ProgressLoop(); });
  RegisterResource(this);
}

MpiCommunicator::~MpiCommunicator() {
  UnregisterResource(this);
  Shutdown();
}

void MpiCommunicator::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (progress_.joinable()) progress_.join();  // runs what is queued, then drains sends
    if (MpiFinalized()) return;
    MpiCallGuard guard;
    IgnoreMpiLeaks ignore;
    MPI_Comm_free(&p2p_comm_);
    MPI_Comm_free(&comm_);
  });
}

void MpiCommunicator::Abort(const Status& reason) {
  Status s = Status::Aborted(reason.ok() ? "aborted by caller" : reason.message());
  state_->Poison(s);
}

// ---- Issue -------------------------------------------------------------------------------

WorkHandle MpiCommunicator::Issue(const CallDesc& d, const void* send, const void* recv, const CollectiveOptions& opts,
                                  bool eager, RunFn run) {
  Status valid = ValidateCall(d, rank(), size(), send, recv);
  if (!valid.ok()) return CompletedWork(valid);
  const uint64_t seq = IsP2P(d) ? 0 : ++next_seq_;
  if (state_->poisoned()) return CompletedWork(state_->AbortedStatus(d, seq));
  auto w = std::make_shared<MpiWork>(state_, weak_from_this(), d, seq, opts, eager, std::move(run));
  bool wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) return CompletedWork(Status::Aborted("communicator is shut down"));
    queue_.push_back(w);
    if (eager) ++eager_pending_;
    wake = eager || idle_;
  }
  if (wake) cv_.notify_one();
  return w;
}

// ---- Executor ----------------------------------------------------------------------------

std::shared_ptr<MpiWork> MpiCommunicator::PopFront() {
  std::lock_guard<std::mutex> lk(mu_);
  if (queue_.empty()) return nullptr;
  std::shared_ptr<MpiWork> w = std::move(queue_.front());
  queue_.pop_front();
  if (w->eager) --eager_pending_;
  return w;
}

bool MpiCommunicator::TryRunInline(MpiWork& target, int64_t caller_deadline_ns) {
  std::unique_lock<std::mutex> exec(exec_mu_, std::try_to_lock);
  if (!exec.owns_lock()) return false;
  while (!target.Done()) {
    std::shared_ptr<MpiWork> w = PopFront();
    if (!w) break;
    Execute(*w, caller_deadline_ns);
  }
  return true;
}

// As the threads backend's (comm/threads/comm_impl.cc): with nothing queued and no send staged
// the thread sleeps until Issue (or a staged send) wakes it, instead of polling every 1 ms for a
// second after any activity, which took CPU from oversubscribed ranks.
void MpiCommunicator::ProgressLoop() {
  for (;;) {
    bool runnable = false;
    {
      std::unique_lock<std::mutex> lk(mu_);
      const int64_t now = NowNanos();
      idle_ = false;
      int64_t sleep_ns;
      if (!queue_.empty()) {
        const int64_t age = now - queue_.front()->enqueue_ns;
        runnable = stop_ || eager_pending_ > 0 || age >= kLazyPickupNs;
        sleep_ns = kLazyPickupNs - age;
      } else if (stop_) {
        break;
      } else if (has_staged_.load(std::memory_order_relaxed)) {
        sleep_ns = kPollNs;
      } else {
        idle_ = true;  // Issue wakes us
        sleep_ns = int64_t{3600} * 1'000'000'000;
      }
      if (!runnable) {
        cv_.wait_for(lk, std::chrono::nanoseconds(sleep_ns));
        if (!has_staged_.load(std::memory_order_relaxed)) continue;
      }
    }
    std::lock_guard<std::mutex> exec(exec_mu_);
    if (!staged_.empty()) ServiceSends(false);
    has_staged_.store(!staged_.empty(), std::memory_order_relaxed);
    if (!runnable) continue;
    while (std::shared_ptr<MpiWork> w = PopFront()) Execute(*w, int64_t{1} << 62);
  }
  std::lock_guard<std::mutex> exec(exec_mu_);
  ServiceSends(true);
}

void MpiCommunicator::Execute(MpiWork& w, int64_t caller_deadline_ns) {
  RunFn run = std::move(w.run);
  w.run = nullptr;
  if (state_->poisoned()) {
    w.Finish(state_->AbortedStatus(w.desc, w.seq));
    return;
  }
  const bool p2p = IsP2P(w.desc);
  const int64_t deadline = std::min(NowNanos() + ToNanos(w.opts.timeout), caller_deadline_ns);
  ExecContext ctx(*state_, p2p ? p2p_comm_ : comm_, w.desc, w.seq, deadline, &scratch_);
  if (!p2p) state_->board().Started(w.seq);
  Status s;
  if (!p2p && options_.debug_collectives) s = CheckSameCall(ctx);
  if (s.ok()) s = run(ctx);
  if (!s.ok() && s.code() != StatusCode::kInvalidArgument && s.code() != StatusCode::kUnimplemented) {
    if (!state_->poisoned()) {  // one line per rank: its first failure
      LS_LOG(ERROR) << s.message();
    }
    state_->Poison(s);
  }
  if (!staged_.empty() && !has_staged_.load(std::memory_order_relaxed)) {
    has_staged_.store(true, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lk(mu_);  // an idle progress thread must start polling the sends
    if (idle_) cv_.notify_one();
  }
  w.Finish(std::move(s));
}

namespace {

// The buffers of the debug check's allgather (heap-allocated: see KeepForever).
struct CheckBuffers {
  CallDesc mine;
  std::vector<CallDesc> calls;
};

}  // namespace

Status MpiCommunicator::CheckSameCall(ExecContext& ctx) {
  const int n = size();
  auto buffers = std::make_unique<CheckBuffers>();
  buffers->calls.resize(static_cast<size_t>(n));
  buffers->mine = ctx.desc();
  const CallDesc& mine = buffers->mine;
  const std::vector<CallDesc>& calls = buffers->calls;
  MPI_Request req = MPI_REQUEST_NULL;
  {
    MpiCallGuard guard;
    int rc = MPI_Iallgather(&buffers->mine, sizeof(CallDesc), MPI_BYTE, buffers->calls.data(), sizeof(CallDesc),
                            MPI_BYTE, comm_, &req);
    LS_RETURN_IF_ERROR(ctx.Check(rc, "MPI_Iallgather (debug check)"));
  }
  // Every rank at this collective posts the check before anything else, so when a peer has
  // already reported the desync (aborting the communicator) this all-gather still completes:
  // give it a second rather than abandoning it.
  Status waited = ctx.WaitAll(&req, 1, nullptr, RequestKind::kCollective, /*abort_grace_ns=*/1'000'000'000);
  if (!waited.ok()) {
    KeepForever(std::shared_ptr<void>(std::move(buffers)));  // MPI may still write into them
    return waited;
  }
  bool same = true;
  for (const CallDesc& c : calls) {
    // The algorithm hint must agree too: it selects the message pattern on this backend.
    same = same && SameCall(c, mine) && c.algorithm == mine.algorithm;
  }
  if (same) return Status::Ok();
  return Status::Aborted(DesyncMessage(ctx.seq(), calls));
}

void MpiCommunicator::ServiceSends(bool drain) {
  for (auto it = staged_.begin(); it != staged_.end();) {
    int flag = 0;
    for (;;) {
      {
        MpiCallGuard guard;
        MPI_Test(&it->req, &flag, MPI_STATUS_IGNORE);
      }
      if (flag || !drain || NowNanos() > it->deadline_ns || state_->poisoned()) break;
      std::this_thread::yield();
    }
    if (flag) {
      it = staged_.erase(it);
    } else if (drain) {
      // Never received. MPI may still read the staging buffer, so it is leaked on purpose;
      // the recorded request makes finalization abort instead of waiting for it.
      NoteAbandonedRequests(1);
      static_cast<void>(new std::vector<unsigned char>(std::move(it->bytes)));
      it = staged_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace lockstep::comm::mpi_detail
