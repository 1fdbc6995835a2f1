#include "lockstep/optim/lr_schedule.h"

#include <cmath>
#include <numbers>
#include <string>

namespace lockstep::optim {

Status ValidateLrScheduleOptions(const LrScheduleOptions& o) {
  if (!(o.lr > 0.0) || !std::isfinite(o.lr)) {
    return Status::InvalidArgument("optim.lr: expected a finite number > 0, got " + std::to_string(o.lr));
  }
  if (!(o.min_lr >= 0.0 && o.min_lr <= o.lr)) {
    return Status::InvalidArgument("optim.min_lr: expected a number in [0, optim.lr = " + std::to_string(o.lr) +
                                   "], got " + std::to_string(o.min_lr));
  }
  if (o.warmup_steps < 0) {
    return Status::InvalidArgument("optim.warmup_steps: expected an integer >= 0, got " +
                                   std::to_string(o.warmup_steps));
  }
  return Status::Ok();
}

Result<LrSchedule> LrSchedule::Create(const LrScheduleOptions& options) {
  LS_RETURN_IF_ERROR(ValidateLrScheduleOptions(options));
  return LrSchedule(options);
}

float LrSchedule::LrAt(int64_t step) const {
  const LrScheduleOptions& o = options_;
  if (step < 0) step = 0;
  if (step < o.warmup_steps) {
    return static_cast<float>(o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps));
  }
  if (o.kind == LrScheduleKind::kConstant) return static_cast<float>(o.lr);
  if (step >= o.total_steps) return static_cast<float>(o.min_lr);
  double ratio = static_cast<double>(step - o.warmup_steps) / static_cast<double>(o.total_steps - o.warmup_steps);
  double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return static_cast<float>(o.min_lr + coeff * (o.lr - o.min_lr));
}

}  // namespace lockstep::optim
