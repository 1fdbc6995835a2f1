#include "lockstep/comm/threads/comm_impl.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "lockstep/core/log.h"

namespace lockstep::comm::threads {

namespace {

constexpr int64_t kLazyPickupNs = 500'000;  // an unwaited small op waits at most this
constexpr int64_t kWaitSliceNs = 1'000'000;      // Wait() first retries running inline after
constexpr int64_t kMaxWaitSliceNs = 32'000'000;  // this, then at doubling intervals up to this

int64_t DeadlineAfter(int64_t now, std::chrono::milliseconds d) {
  if (d.count() <= 0) return now;
  if (d.count() >= (kNoDeadline - now) / 1'000'000) return kNoDeadline;
  return now + d.count() * 1'000'000;
}

bool IsP2P(const Op& op) { return op.call.kind == OpKind::kSend || op.call.kind == OpKind::kRecv; }

}  // namespace

CommImpl::CommImpl(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {
  in_ptrs_.resize(group_->size());
  out_ptrs_.resize(group_->size());
  progress_ = std::thread([this] { ProgressLoop(); });
}

CommImpl::~CommImpl() { Shutdown(); }

void CommImpl::Shutdown() {
  bool pending;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (stop_) return;
    stop_ = true;
    pending = !queue_.empty();
  }
  bool executing = !exec_mu_.try_lock();
  if (!executing) exec_mu_.unlock();
  if (pending || executing) {
    // Peers must not wait for collectives this rank will never run.
    group_->Abort(Status::Aborted("rank " + std::to_string(rank_) + ": communicator destroyed with operations pending"),
                  0);
  }
  queue_word_.Bump();
  if (progress_.joinable()) progress_.join();
}

namespace {

class ThreadsWork final : public Work {
 public:
  ThreadsWork(std::shared_ptr<CommImpl> impl, std::shared_ptr<Op> op) : impl_(std::move(impl)), op_(std::move(op)) {}
  using Work::Wait;
  Status Wait(std::chrono::milliseconds timeout) override { return impl_->WaitOp(op_, timeout); }
  bool Done() override { return op_->done.value.load(std::memory_order_acquire) != 0; }
  std::chrono::milliseconds timeout() const override { return op_->opts.timeout; }

 private:
  std::shared_ptr<CommImpl> impl_;
  std::shared_ptr<Op> op_;
};

}  // namespace

WorkHandle CommImpl::Enqueue(std::shared_ptr<Op> op) {
  op->enqueue_ns = NowNanos();
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (stop_) {
      Finish(*op, Status::Aborted("rank " + std::to_string(rank_) + ": " + OpLabel(*op) +
                                  " aborted: communicator destroyed"));
    } else {
      wake = op->eager || idle_;
      if (op->eager) ++eager_pending_;
      queue_.push_back(op);
    }
  }
  if (wake) queue_word_.Bump();
  return std::make_shared<ThreadsWork>(shared_from_this(), std::move(op));
}

std::shared_ptr<Op> CommImpl::PopFront() {
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (queue_.empty()) return nullptr;
  std::shared_ptr<Op> op = std::move(queue_.front());
  queue_.pop_front();
  if (op->eager) --eager_pending_;
  return op;
}

// With nothing queued the progress thread sleeps until Enqueue wakes it; with a small (lazy)
// operation queued it sleeps until that one is kLazyPickupNs old, in case its caller does not
// Wait() for it (a waiting caller runs it inline). It used to poll every 1 ms for a second
// after any activity instead of being woken: with a progress thread per communicator (five per
// rank in a dp x tp layout) that was thousands of wake-ups a second per rank, and on
// oversubscribed cores they took the ranks' CPU. The cost now is one futex wake per small
// operation enqueued while the thread sleeps.
void CommImpl::ProgressLoop() {
  while (true) {
    uint32_t seen = queue_word_.value.load(std::memory_order_seq_cst);
    bool runnable = false, stopping = false;
    int64_t sleep_ns = 0;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      int64_t now = NowNanos();
      stopping = stop_;
      idle_ = false;
      if (!queue_.empty()) {
        int64_t age = now - queue_.front()->enqueue_ns;
        runnable = stopping || eager_pending_ > 0 || age >= kLazyPickupNs;
        sleep_ns = kLazyPickupNs - age;
      } else if (stopping) {
        return;
      } else {
        idle_ = true;  // Enqueue wakes us
        sleep_ns = 3'600'000'000'000;
      }
    }
    if (runnable) {
      std::lock_guard<std::mutex> exec(exec_mu_);
      while (std::shared_ptr<Op> op = PopFront()) {
        if (stopping) {
          Finish(*op, Status::Aborted("rank " + std::to_string(rank_) + ": " + OpLabel(*op) +
                                      " aborted: communicator destroyed"));
        } else {
          Execute(*op, kNoDeadline);
        }
      }
      continue;
    }
    queue_word_.sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (queue_word_.value.load(std::memory_order_seq_cst) == seen) {
      FutexWait(&queue_word_.value, seen, sleep_ns);
    }
    queue_word_.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

bool CommImpl::TryRunUntil(const Op& op, int64_t caller_deadline_ns) {
  if (!exec_mu_.try_lock()) return false;
  while (op.done.value.load(std::memory_order_acquire) == 0) {
    std::shared_ptr<Op> front = PopFront();
    if (!front) break;
    Execute(*front, caller_deadline_ns);
  }
  exec_mu_.unlock();
  return true;
}

Status CommImpl::WaitOp(const std::shared_ptr<Op>& op, std::chrono::milliseconds timeout) {
  const int64_t start = NowNanos();
  const int64_t deadline = DeadlineAfter(start, timeout);
  auto done = [&] { return op->done.value.load(std::memory_order_acquire) != 0; };
  // Spin only in the first slice, then let slices grow: a later one means another thread
  // runs a long operation (it publishes `done` and wakes us); spinning or waking every 1 ms
  // took a core from it and its peers (~10% of 64 MiB allreduce bandwidth on two cores).
  int64_t spin_ns = group_->spin_ns();
  int64_t slice_ns = kWaitSliceNs;
  while (!done()) {
    if (TryRunUntil(*op, deadline)) continue;
    int64_t now = NowNanos();
    if (now >= deadline) break;
    int64_t slice = deadline - now < slice_ns ? deadline : now + slice_ns;
    WaitFor(op->done, done, slice, spin_ns);
    spin_ns = 0;
    slice_ns = std::min(2 * slice_ns, kMaxWaitSliceNs);
  }
  if (done()) return op->status;
  // The caller gave up: abort so that the operation stops touching the buffers, wait for it
  // to settle (bounded: uncommitted waits end at once, committed collectives finish), and
  // report the timeout.
  std::chrono::nanoseconds waited(NowNanos() - start);
  Status timeout_status =
      IsP2P(*op) ? Status::Timeout(P2PTimeoutMessage(rank_, op->call, waited))
                 : Status::Timeout(TimeoutMessage(rank_, op->call, op->seq, waited, group_->MissingRanks(op->seq)));
  bool aborted = true;
  if (IsP2P(*op)) {
    group_->Abort(timeout_status, 0);
  } else {
    aborted = group_->TryAbortUncommitted(op->seq, timeout_status);
  }
  if (aborted) {
    LS_LOG(ERROR) << timeout_status.message();
    Poison(timeout_status);
  }
  while (!done()) {
    if (!TryRunUntil(*op, kNoDeadline)) {
      WaitFor(op->done, done, NowNanos() + kWaitSliceNs, group_->spin_ns());
    }
  }
  return op->status.ok() ? op->status : timeout_status;
}

void CommImpl::Finish(Op& op, Status status) {
  op.status = std::move(status);
  op.done.Publish(1);
}

void CommImpl::Execute(Op& op, int64_t caller_deadline_ns) {
  Status status;
  try {
    if (failed_flag_.load(std::memory_order_acquire)) {
      status = FailedStatus(op);
    } else {
      const int64_t now = NowNanos();
      const int64_t deadline = std::min(caller_deadline_ns, DeadlineAfter(now, op.opts.timeout));
      if (op.call.kind == OpKind::kSend) {
        status = RunSend(op);
      } else if (op.call.kind == OpKind::kRecv) {
        status = RunRecv(op, deadline);
      } else {
        status = RunCollective(op, deadline);
      }
    }
  } catch (const std::exception& e) {
    status = Status::Internal("rank " + std::to_string(rank_) + ": " + OpLabel(op) + ": " + e.what());
    Poison(status);
    group_->Abort(status, op.seq);
  }
  Finish(op, std::move(status));
}

std::string CommImpl::OpLabel(const Op& op) const {
  if (IsP2P(op)) return Describe(op.call);
  return std::string("collective ") + OpKindName(op.call.kind) + " #" + std::to_string(op.seq);
}

void CommImpl::Poison(const Status& status) {
  std::lock_guard<std::mutex> lock(failed_mu_);
  if (failed_.ok()) failed_ = status;
  failed_flag_.store(true, std::memory_order_release);
}

Status CommImpl::FailedStatus(const Op& op) {
  std::lock_guard<std::mutex> lock(failed_mu_);
  return Status::Aborted("rank " + std::to_string(rank_) + ": " + OpLabel(op) +
                         " aborted: communicator failed earlier: " + failed_.message());
}

void CommImpl::Abort(const Status& reason) {
  Status s = Status::Aborted(reason.ok() ? "aborted by caller" : reason.message());
  Poison(s);
  group_->Abort(s, 0);
}

Status CommImpl::RunSend(Op& op) {
  Message m;
  m.dtype = op.call.dtype;
  const size_t bytes = op.call.count * DTypeSize(op.call.dtype);
  m.bytes.resize(bytes);
  if (bytes > 0) std::memcpy(m.bytes.data(), op.send, bytes);
  if (group_->aborted()) {
    return Status::Aborted("rank " + std::to_string(rank_) + ": " + OpLabel(op) +
                           " aborted: " + group_->abort_status().first.message());
  }
  group_->Post(rank_, op.call.root, op.call.aux, std::move(m));
  return Status::Ok();
}

Status CommImpl::RunRecv(Op& op, int64_t deadline_ns) {
  const int64_t start = NowNanos();
  Message m;
  if (!group_->Take(op.call.root, rank_, op.call.aux, deadline_ns, &m)) {
    if (group_->aborted()) {
      Status s = Status::Aborted("rank " + std::to_string(rank_) + ": " + OpLabel(op) +
                                 " aborted: " + group_->abort_status().first.message());
      Poison(s);
      return s;
    }
    Status s = Status::Timeout(P2PTimeoutMessage(rank_, op.call, std::chrono::nanoseconds(NowNanos() - start)));
    LS_LOG(ERROR) << s.message();
    Poison(s);
    group_->Abort(s, 0);
    return s;
  }
  const size_t bytes = op.call.count * DTypeSize(op.call.dtype);
  if (m.dtype != op.call.dtype || m.bytes.size() != bytes) {
    return Status::InvalidArgument("rank " + std::to_string(rank_) + ": " + OpLabel(op) + ": the matching send had " +
                                   std::to_string(m.bytes.size() / DTypeSize(m.dtype)) + " elements of " +
                                   DTypeName(m.dtype));
  }
  if (bytes > 0) std::memcpy(op.recv, m.bytes.data(), bytes);
  return Status::Ok();
}

}  // namespace lockstep::comm::threads
