// RunSetup: a `lockstep train` invocation resolved into everything every rank needs —
// config (after --set), typed sections, step counts, output paths, shared datasets. Built
// once per process by SetUpRun(); read-only afterwards (each rank copies the Config,
// whose getters record keys and are not thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/core/config.h"
#include "lockstep/optim/optim_config.h"
#include "lockstep/parallel/canonical.h"
#include "lockstep/runtime/setup/fault_spec.h"
#include "lockstep/job.h"
#include "lockstep/runtime/setup/run_config.h"
#include "lockstep/runtime/setup/run_layout.h"
#include "lockstep/train_options.h"

namespace lockstep::runtime {

struct RunSetup {
  TrainOptions options;
  Config config;
  RunConfig run;
  optim::OptimConfig optim;
  std::string config_name;  // config file stem: "gpt-tiny"
  std::string out_dir;
  int world = 1;
  int threads_per_worker = 1;
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
  int64_t eval_every = 0;  // resolved: steps between validations (0 = only at the end)
  Job job;
  DataSources data;                          // the job's sources, loaded once per process
  FaultSpec fault;                           // --inject-fault
  std::vector<std::string> config_warnings;  // known keys this run ignores, one line each
  std::string resume_dir;                    // checkpoint to resume from ("" = start at step 0)
  RunLayout layout;                          // dp x tp x pp, ZeRO stage, canonical slices, pipeline partition
  // --init-from: the starting weights (full canonical tensors, shared read-only by the ranks
  // of this process); null: the model's initialisation. Not used when resuming.
  std::shared_ptr<const parallel::CanonicalTensors> init_weights;
  // The process's resident set once the setup is made (libraries, runtime, the job's data
  // loaded) and before any worker builds a model: what the memory row's sums sit on top of.
  int64_t rss_baseline_bytes = 0;
};

// Reads the config, applies overrides and flags, validates every key and value (bad input
// is InvalidArgument naming the key or flag), checks the job's model against its data and the
// layout, loads the datasets and creates --out.
Result<RunSetup> SetUpRun(const Job& job, const TrainOptions& options, int world);

// --out, or runs/<config file stem> when it is not given (runs/train without a file).
std::string OutDirFor(const TrainOptions& options);

// The run's config: options.config_path or else options.config_toml, then the overrides.
Result<Config> LoadTrainConfig(const TrainOptions& options);

}  // namespace lockstep::runtime
