#include "lockstep/comm/communicator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace lockstep::comm {

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

const char* AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kDirect:
      return "direct";
    case Algorithm::kDeterministic:
      return "deterministic";
  }
  return "?";
}

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllreduce:
      return "allreduce";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kAllGather:
      return "allgather";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kReduce:
      return "reduce";
    case OpKind::kAllToAll:
      return "alltoall";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kDeterministicAllreduce:
      return "deterministic_allreduce";
    case OpKind::kSplit:
      return "split";
  }
  return "?";
}

namespace {

constexpr int64_t kBuiltinTimeoutMs = 300'000;
// -1: not set by SetDefaultTimeout; the environment (or the built-in value) applies.
std::atomic<int64_t> g_timeout_override_ms{-1};

int64_t TimeoutFromEnvMs() {
  static const int64_t value = [] {
    const char* s = std::getenv("LOCKSTEP_COLLECTIVE_TIMEOUT_S");
    if (s == nullptr || *s == '\0') return kBuiltinTimeoutMs;
    char* end = nullptr;
    double seconds = std::strtod(s, &end);
    if (end == s || *end != '\0' || !(seconds > 0) || seconds > 1e7) return kBuiltinTimeoutMs;
    return static_cast<int64_t>(seconds * 1000.0 + 0.5);
  }();
  return value;
}

}  // namespace

std::chrono::milliseconds DefaultTimeout() {
  int64_t ms = g_timeout_override_ms.load(std::memory_order_relaxed);
  return std::chrono::milliseconds(ms >= 0 ? ms : TimeoutFromEnvMs());
}

void SetDefaultTimeout(std::chrono::milliseconds timeout) {
  g_timeout_override_ms.store(timeout.count() < 0 ? 0 : timeout.count(), std::memory_order_relaxed);
}

bool DebugCollectivesFromEnv() {
  static const bool value = [] {
    const char* s = std::getenv("LOCKSTEP_DEBUG_COLLECTIVES");
    return s != nullptr && *s != '\0' && std::strcmp(s, "0") != 0;
  }();
  return value;
}

namespace {

class CompletedWorkImpl final : public Work {
 public:
  explicit CompletedWorkImpl(Status status) : status_(std::move(status)) {}
  using Work::Wait;
  Status Wait(std::chrono::milliseconds) override { return status_; }
  bool Done() override { return true; }
  std::chrono::milliseconds timeout() const override { return std::chrono::milliseconds(0); }

 private:
  Status status_;
};

}  // namespace

WorkHandle CompletedWork(Status status) { return std::make_shared<CompletedWorkImpl>(std::move(status)); }

}  // namespace lockstep::comm
