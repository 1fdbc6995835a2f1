// The executor and the issuing side of HierCommunicator; the collectives' steps are in
// hier_collectives.cc.
#include "lockstep/comm/hier/hier_communicator.h"

#include <algorithm>
#include <string>

#include "lockstep/core/clock.h"

namespace lockstep::comm::hier_detail {

// One queued operation and its handle.
class HierCommunicator::Task final : public Work {
 public:
  Task(const char* what, const CollectiveOptions& opts, Body body, std::shared_ptr<Communicator> local,
       std::shared_ptr<Communicator> cross, std::shared_ptr<std::atomic<bool>> stop)
      : what(what),
        opts(opts),
        body(std::move(body)),
        local_(std::move(local)),
        cross_(std::move(cross)),
        stop_(std::move(stop)) {}

  using Work::Wait;
  Status Wait(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    // The steps keep the operation's own deadline and fail with a message naming the step and
    // the missing peer; the grace lets that message, not this generic one, reach the caller.
    if (cv_.wait_for(lock, timeout + kGrace, [&] { return done_; })) return status_;
    lock.unlock();
    const Status expired = Status::Timeout(std::string("hier: ") + what + " timed out after " +
                                           std::to_string(timeout.count() / 1000.0) + " s");
    stop_->store(true, std::memory_order_release);
    local_->Abort(expired);
    if (cross_ != nullptr) cross_->Abort(expired);
    lock.lock();
    // Aborted steps return at once; wait for that, so the buffers are free when Wait returns.
    cv_.wait_for(lock, kGrace, [&] { return done_; });
    return expired;
  }
  bool Done() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  std::chrono::milliseconds timeout() const override { return opts.timeout; }

  void Finish(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(status);
    done_ = true;
    cv_.notify_all();
  }

  const char* const what;
  const CollectiveOptions opts;
  Body body;

 private:
  static constexpr std::chrono::milliseconds kGrace{2000};
  std::shared_ptr<Communicator> local_, cross_;
  std::shared_ptr<std::atomic<bool>> stop_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

CollectiveOptions HierCommunicator::Steps::Next() const {
  CollectiveOptions next = opts;
  const int64_t left_ms = (deadline_ns - NowNanos()) / 1'000'000;
  next.timeout = std::chrono::milliseconds(std::max<int64_t>(1, left_ms));
  return next;
}

HierCommunicator::HierCommunicator(std::shared_ptr<HostContext> context, std::shared_ptr<Communicator> local,
                                   std::shared_ptr<Communicator> cross)
    : context_(std::move(context)),
      local_(std::move(local)),
      cross_(std::move(cross)),
      host_(context_->host()),
      hosts_(context_->hosts()),
      local_rank_(local_->rank()),
      local_size_(local_->size()),
      thread_([this] { Loop(); }) {}

HierCommunicator::~HierCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

WorkHandle HierCommunicator::Enqueue(const char* what, const CollectiveOptions& opts, Body body) {
  auto task = std::make_shared<Task>(what, opts, std::move(body), local_, cross_, stop_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(task);
  }
  cv_.notify_all();
  return task;
}

void HierCommunicator::Loop() {
  for (;;) {
    std::shared_ptr<Task> task;
    Status poisoned;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      poisoned = poisoned_;
      stopping = stopping_;
    }
    if (stopping) {
      task->Finish(Status::Aborted(std::string("hier: ") + task->what + ": the communicator was destroyed"));
      continue;
    }
    if (!poisoned.ok()) {
      task->Finish(Status::Aborted(std::string("hier: ") + task->what + ": communicator aborted earlier: " +
                                   poisoned.message()));
      continue;
    }
    const Steps steps{task->opts,
                      NowNanos() + std::chrono::duration_cast<std::chrono::nanoseconds>(task->opts.timeout).count()};
    Status status = task->body(steps);
    task->body = nullptr;  // drop what the body captured before the caller learns it is done
    // An argument error (a split every rank refuses alike) leaves the communicator usable.
    if (!status.ok() && status.code() != StatusCode::kInvalidArgument) Fail(status);
    task->Finish(std::move(status));
  }
}

void HierCommunicator::Fail(const Status& reason) {
  stop_->store(true, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mu_);
  if (poisoned_.ok()) poisoned_ = reason;
}

void HierCommunicator::Abort(const Status& reason) {
  Fail(reason);
  local_->Abort(reason);
  cross_->Abort(reason);
}

Result<std::shared_ptr<Communicator>> HierCommunicator::Split(int color, int key, const CollectiveOptions& opts) {
  std::shared_ptr<Communicator> result;
  WorkHandle work = Enqueue("split", opts, [&](const Steps& s) -> Status {
    SplitPlan plan = context_->PlanSplit(local_rank_, color, key, s.Next());
    if (!plan.status.ok()) return plan.status;
    // Every local worker takes part in the threads split; a group with one member a host
    // needs no threads communicator (its members talk only across hosts).
    const bool needs_local = plan.color >= 0 && (plan.group_hosts <= 1 || plan.local_size > 1);
    Result<std::shared_ptr<Communicator>> local = local_->Split(needs_local ? plan.color : -1, plan.new_rank, s.Next());
    if (!local.ok()) return local.status();
    if (plan.color < 0) return Status::Ok();
    if (plan.group_hosts <= 1) {
      result = *local;
    } else if (plan.local_size == 1) {
      result = plan.cross;
    } else {
      result = std::make_shared<HierCommunicator>(plan.child_context, *local, plan.cross);
    }
    return Status::Ok();
  });
  if (Status s = work->Wait(); !s.ok()) return s;
  return result;
}

}  // namespace lockstep::comm::hier_detail
