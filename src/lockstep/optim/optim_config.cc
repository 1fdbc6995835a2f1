#include "lockstep/optim/optim_config.h"

#include <cmath>

namespace lockstep::optim {

const char* OptimizerName(OptimizerKind kind) { return kind == OptimizerKind::kSgd ? "sgd" : "adamw"; }

Result<OptimConfig> ReadOptimConfig(const Config& config, int64_t total_steps) {
  OptimConfig out;
  LS_ASSIGN_OR_RETURN(std::string name, config.GetString("optim.name", "adamw"));
  if (name == "adamw") {
    out.kind = OptimizerKind::kAdamW;
  } else if (name == "sgd") {
    out.kind = OptimizerKind::kSgd;
  } else {
    return Status::InvalidArgument("optim.name: expected \"adamw\" or \"sgd\", got \"" + name + "\"");
  }

  LS_ASSIGN_OR_RETURN(out.schedule.lr, config.GetDouble("optim.lr", 1e-3));
  if (out.kind == OptimizerKind::kAdamW) {
    AdamWOptions& a = out.adamw;
    LS_ASSIGN_OR_RETURN(a.beta1, config.GetDouble("optim.beta1", a.beta1));
    LS_ASSIGN_OR_RETURN(a.beta2, config.GetDouble("optim.beta2", a.beta2));
    LS_ASSIGN_OR_RETURN(a.eps, config.GetDouble("optim.eps", a.eps));
    LS_ASSIGN_OR_RETURN(a.weight_decay, config.GetDouble("optim.weight_decay", a.weight_decay));
    LS_RETURN_IF_ERROR(ValidateAdamWOptions(a));
  } else {
    SgdOptions& s = out.sgd;
    LS_ASSIGN_OR_RETURN(s.momentum, config.GetDouble("optim.momentum", s.momentum));
    LS_ASSIGN_OR_RETURN(s.dampening, config.GetDouble("optim.dampening", s.dampening));
    LS_ASSIGN_OR_RETURN(s.nesterov, config.GetBool("optim.nesterov", s.nesterov));
    LS_ASSIGN_OR_RETURN(s.weight_decay, config.GetDouble("optim.weight_decay", s.weight_decay));
    LS_RETURN_IF_ERROR(ValidateSgdOptions(s));
  }

  LS_ASSIGN_OR_RETURN(std::string schedule, config.GetString("optim.schedule", "constant"));
  LrScheduleOptions& lr = out.schedule;
  LS_ASSIGN_OR_RETURN(lr.warmup_steps, config.GetInt("optim.warmup_steps", 0));
  if (schedule == "constant") {
    lr.kind = LrScheduleKind::kConstant;
    lr.min_lr = lr.lr;
    lr.total_steps = total_steps;
  } else if (schedule == "cosine") {
    lr.kind = LrScheduleKind::kCosine;
    LS_ASSIGN_OR_RETURN(lr.min_lr, config.GetDouble("optim.min_lr", lr.lr / 10.0));
    LS_ASSIGN_OR_RETURN(lr.total_steps, config.GetInt("optim.decay_steps", total_steps));
  } else {
    return Status::InvalidArgument("optim.schedule: expected \"constant\" or \"cosine\", got \"" + schedule + "\"");
  }
  LS_RETURN_IF_ERROR(ValidateLrScheduleOptions(lr));

  LS_ASSIGN_OR_RETURN(out.grad_clip, config.GetDouble("optim.grad_clip", 0.0));
  if (!(out.grad_clip >= 0.0) || !std::isfinite(out.grad_clip)) {
    return Status::InvalidArgument("optim.grad_clip: expected a finite number >= 0 (0 = off), got " +
                                   std::to_string(out.grad_clip));
  }
  return out;
}

}  // namespace lockstep::optim
