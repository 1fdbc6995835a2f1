// Learning-rate schedules: linear warmup, then cosine decay to min_lr (nanoGPT's get_lr), or
// constant. A pure function of the step, so a restarted run needs no schedule state.
#pragma once

#include <cstdint>

#include "lockstep/core/result.h"

namespace lockstep::optim {

enum class LrScheduleKind { kCosine, kConstant };

struct LrScheduleOptions {
  LrScheduleKind kind = LrScheduleKind::kCosine;
  double lr = 1e-3;          // peak learning rate (optim.lr)
  double min_lr = 0.0;       // floor of the cosine decay (optim.min_lr)
  int64_t warmup_steps = 0;  // optim.warmup_steps; 0 = no warmup
  int64_t total_steps = 0;   // step at which the cosine reaches min_lr (cosine only)
};

// lr > 0, 0 <= min_lr <= lr, warmup_steps >= 0; cosine also needs total_steps > warmup_steps.
// Errors name the config key.
Status ValidateLrScheduleOptions(const LrScheduleOptions& options);

class LrSchedule {
 public:
  static Result<LrSchedule> Create(const LrScheduleOptions& options);

  // Learning rate for optimizer step `step` (0-based: the first step is step 0).
  //   step < W:            lr * (step + 1) / W          (PyTorch LinearLR / nanoGPT style:
  //                                                      the first step already moves)
  //   constant:            lr
  //   cosine, step < S:    min_lr + 0.5 * (1 + cos(pi * (step - W) / (S - W))) * (lr - min_lr)
  //   cosine, step >= S:   min_lr                      (runs longer than planned stay at min)
  // Evaluated in double, rounded to float once.
  float LrAt(int64_t step) const;

  const LrScheduleOptions& options() const { return options_; }

 private:
  explicit LrSchedule(const LrScheduleOptions& options) : options_(options) {}
  LrScheduleOptions options_;
};

}  // namespace lockstep::optim
