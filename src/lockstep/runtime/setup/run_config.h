// RunConfig: the typed view of a run's [train], [eval] and [checkpoint] sections, plus
// data.kind ([model] is read by nn::MakeModel, [optim] by optim::ReadOptimConfig, the rest
// of [data] by data::ReadDataConfig). Reading it marks every key it reads, so the registry
// check (config_keys.h) can tell a known-but-ignored key from an unknown one.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/core/config.h"
#include "lockstep/core/result.h"
#include "lockstep/data/data_config.h"

namespace lockstep::runtime {

struct TrainSection {
  int64_t batch_size = 16;  // global, all workers together
  uint64_t seed = 1234;
  int64_t steps = 0;  // 0: use epochs
  double epochs = 0;
  int threads = 0;  // compute threads per worker; 0 = cores / workers
  int64_t log_every = 10;
  int64_t accum_steps = 1;          // micro-batches per step (gradient accumulation)
  int64_t det_shards = 8;           // deterministic mode: canonical micro-shards per global batch
  int64_t bucket_bytes = 25 << 20;  // DDP gradient bucket size
  // Deterministic mode with tensor parallelism: canonical slices of every split layer
  // (parallel/tp_context.h); 0 = the largest power of two <= 8 dividing the model's heads.
  int64_t det_tp_slices = 0;
  int64_t pp_microbatches = 0;       // pipeline micro-batches per step; 0 = 2 x pp
  std::string pp_schedule = "1f1b";  // gpipe | 1f1b
  // A step whose gradient norm or loss is not finite: stop (exit status 3, the newest
  // checkpoint stays the last good one) or, with skip_nonfinite, skip its update; more than
  // max_skipped such steps in a row stop the run anyway.
  bool skip_nonfinite = false;
  int64_t max_skipped = 10;
  // "block": transformer blocks keep only their input for backward and recompute their
  // forward inside it (autograd/recompute.h); "none": every activation is kept.
  std::string recompute = "none";
  // Mixed precision (tensor/precision.h): "fp32" or "bf16" products; gradients reduced over dp
  // in "fp32" or "bf16" (rounded to bf16 before the reduction, halving its bytes).
  std::string precision = "fp32";
  std::string grad_dtype = "fp32";
  // Communication (docs/low-communication.md). grad_compression "bf16" is grad_dtype = bf16
  // under its newer name; "powersgd": rank-r PowerSGD with error feedback from
  // powersgd_start_step on (uncompressed before it).
  std::string grad_compression = "none";
  int64_t powersgd_rank = 4;
  int64_t powersgd_start_step = 10;
  // "every_step" (synchronous data parallelism) or "diloco" (parallel/diloco.h): replicas take
  // diloco_inner_steps steps alone, then average their change under an outer Nesterov SGD.
  std::string sync = "every_step";
  int64_t diloco_inner_steps = 50;
  double diloco_outer_lr = 0.7;
  double diloco_outer_momentum = 0.9;
  int64_t diloco_fragments = 1;
  std::string diloco_outer_dtype = "fp32";
  int64_t diloco_overlap_steps = 0;  // Streaming DiLoCo's tau (parallel/diloco.h)
  double diloco_merge_alpha = 0;
  bool diloco() const { return sync == "diloco"; }
  bool powersgd() const { return grad_compression == "powersgd"; }
  // A rank whose compute time stays above straggler_ratio x the median of the ranks doing the
  // same work for straggler_steps steps in a row is named in a warning and a metrics row.
  double straggler_ratio = 1.2;
  int64_t straggler_steps = 20;
};

struct EvalSection {
  int64_t every = 0;  // steps; 0 = once per epoch (and at the end)
};

struct CheckpointSection {
  int64_t every = 0;  // steps; 0 = only at the end
  int64_t keep = 3;
  bool async = true;  // write in the background from a staging copy
};

struct RunConfig {
  TrainSection train;
  EvalSection eval;
  CheckpointSection checkpoint;
  data::DataConfig data;  // data.*, eval.batch_size, eval.batches (data/data_config.h)
};

// Reads and validates the sections; errors name the key and what was expected. With
// `builtin_data` false (a program's own data sources) data.kind and data.dir are not read.
Result<RunConfig> ReadRunConfig(const Config& config, bool builtin_data = true);

}  // namespace lockstep::runtime
