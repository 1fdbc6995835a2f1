// The Trainer's faults (trainer.h): the injected ones (a slow rank, a non-finite gradient or
// loss) and what a step whose gradient or loss is not finite does.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>

#include "lockstep/core/log.h"
#include "lockstep/runtime/setup/fault_spec.h"
#include "lockstep/runtime/training/trainer.h"

namespace lockstep::runtime {

// --inject-fault slow: the slow rank sleeps (F - 1) x the time its forward and backward passes
// of the step took, so its compute takes F times as long. It sleeps once its passes are done
// but before its gradients leave: with DDP just before its last bucket is launched (the hook
// below), otherwise before the gradient synchronisation; its peers wait for it in the gradient
// collectives, as they would for a slower processor. Its passes run beside its peers' (a sleep
// before them would let them run alone, on a machine with fewer cores than ranks, and so
// faster). Pipeline stages stretch each pass instead (PipelineRunner::set_slow_factor).
void Trainer::BeginSlowStep(int64_t step) {
  slow_factor_ = SlowFactor(setup_.fault, rank_, step);
  compute_start_ns_ = NowNanos();
  slept_ = false;
  if (pipeline_) pipeline_->set_slow_factor(slow_factor_);
  if (slow_factor_ > 1.0 && ddp_) ddp_->set_before_last_launch([this] { SlowDown(); });
}

void Trainer::SlowDown() {
  if (slow_factor_ <= 1.0 || slept_) return;
  slept_ = true;
  const double passes_ms = (NowNanos() - compute_start_ns_) * 1e-6;
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>((slow_factor_ - 1.0) * passes_ms));
}

// --inject-fault nan: an inf in the first gradient element this rank counts in the norm.
void Trainer::InjectNonFiniteGrad() {
  bool done = false;
  ForEachCountedGrad([&](int, float* g, int64_t n) {
    if (done || n == 0) return;
    g[0] = std::numeric_limits<float>::infinity();
    done = true;
  });
  LS_LOG(WARN) << "injected fault: inf in a gradient element at step " << setup_.fault.step;
}

// A step whose global gradient norm or loss is not finite never reaches the optimizer. Every
// rank sees the same norm and loss, so all take the same branch. The ranks tell rank 0 the
// first parameter whose gradient they found non-finite; then the run stops (exit status 3:
// the newest checkpoint is still the last good one, and the supervisor does not retry), or
// with train.skip_nonfinite the update is skipped and training goes on, up to
// train.max_skipped such steps in a row.
Status Trainer::HandleNonFinite(int64_t step, double loss, double grad_norm) {
  std::string where = NonFiniteWhere();
  if (where.empty()) where = std::isfinite(loss) ? "an element no rank could name" : "the loss";
  char what[96];
  std::snprintf(what, sizeof(what), "loss %g, gradient norm %g", loss, grad_norm);
  const std::string at = "step " + std::to_string(step + 1) + ": non-finite " + what + " (first: " + where + ")";
  const TrainSection& t = setup_.run.train;
  if (!t.skip_nonfinite)
    return Status::NonFinite(at +
                             "; stopped before the update, the newest checkpoint is the last good one "
                             "(train.skip_nonfinite = true skips such steps)");
  ++consecutive_skips_;
  if (consecutive_skips_ > t.max_skipped)
    return Status::NonFinite(at + "; " + std::to_string(consecutive_skips_) +
                             " steps in a row were non-finite (train.max_skipped = " + std::to_string(t.max_skipped) +
                             "), stopping; the newest checkpoint is the last good one");
  if (!reporter_) return Status::Ok();
  return reporter_->Skipped(step + 1, where, consecutive_skips_,
                            at + "; update skipped (" + std::to_string(consecutive_skips_) + " in a row)");
}

// The first parameter (in this rank's order) holding a non-finite gradient element this rank
// counts, gathered from every rank: rank 0's answer is the first non-empty one in rank order.
// Best effort: a failed gather leaves it unnamed, the step is non-finite all the same.
std::string Trainer::NonFiniteWhere() {
  constexpr size_t kName = 120;
  char mine[kName] = {};
  ForEachCountedGrad([&](int i, const float* g, int64_t n) {
    if (mine[0] != 0) return;
    for (int64_t k = 0; k < n; ++k) {
      if (std::isfinite(g[k])) continue;
      std::snprintf(mine, kName, "%s on rank %d", model_->params().info(i).name.c_str(), rank_);
      return;
    }
  });
  if (world_ == 1) return mine;
  std::vector<char> all(kName * static_cast<size_t>(world_));
  if (!world_comm_->AllGather(mine, all.data(), kName, comm::DType::kU8)->Wait().ok()) return "";
  for (int r = 0; r < world_; ++r) {
    const char* name = all.data() + kName * static_cast<size_t>(r);
    if (name[0] != 0) return std::string(name, strnlen(name, kName));
  }
  return "";
}

}  // namespace lockstep::runtime
