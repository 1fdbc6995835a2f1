// Reads the `optim` section of a run's config into optimizer, schedule and clipping options.
// Defaults mirror torch.optim's own (so a config that says only `lr` behaves like the PyTorch
// peers): AdamW with its defaults, constant lr, no warmup, no clipping.
//
// Keys (all optional; validated, each error names its key):
//   optim.name          "adamw" | "sgd"
//   optim.lr            peak learning rate (1e-3)
//   optim.weight_decay  adamw 0.01, sgd 0 (applied only to decay=true parameters)
//   optim.beta1, optim.beta2, optim.eps                       adamw only
//   optim.momentum, optim.dampening, optim.nesterov           sgd only
//   optim.schedule      "constant" | "cosine"
//   optim.warmup_steps  0
//   optim.min_lr        cosine only; default lr / 10 (nanoGPT's choice)
//   optim.decay_steps   cosine only; step where min_lr is reached; default: the run's steps
//   optim.grad_clip     max global gradient norm; 0 = no clipping
// Keys of the optimizer not chosen are not read, so the runtime's key check warns that e.g.
// optim.momentum set for adamw is ignored instead of silently dropping it.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/core/config.h"
#include "lockstep/optim/adamw.h"
#include "lockstep/optim/lr_schedule.h"
#include "lockstep/optim/sgd.h"

namespace lockstep::optim {

enum class OptimizerKind { kAdamW, kSgd };

struct OptimConfig {
  OptimizerKind kind = OptimizerKind::kAdamW;
  AdamWOptions adamw;
  SgdOptions sgd;
  LrScheduleOptions schedule;
  double grad_clip = 0.0;  // 0 = off
};

// `total_steps` is the run's planned number of optimizer steps (from --steps / --epochs); it is
// the default end of the cosine decay.
Result<OptimConfig> ReadOptimConfig(const Config& config, int64_t total_steps);

const char* OptimizerName(OptimizerKind kind);

}  // namespace lockstep::optim
