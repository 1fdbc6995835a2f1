// The flags of `lockstep train`, defined once for the command (cli/commands.cc) and for a
// program's own trainer (ParseTrainFlags in train.h). Internal: CLI11 is not part of the
// installed interface.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "lockstep/core/status.h"
#include "lockstep/job.h"
#include "lockstep/train_options.h"

namespace lockstep::api {

struct FlagValues {
  TrainOptions options;        // starts as the program's defaults; flags overwrite fields
  std::vector<std::string> sets;        // --set, appended to options.overrides by FinishTrainFlags
  std::string mem_limit;                // --mem-limit text (K/M/G)
  CLI::Option* nproc_option = nullptr;  // set by AddTrainFlags: was --nproc given?
};

// Adds the trainer's flags to `app` (bound to `flags`, which must outlive the parse).
void AddTrainFlags(CLI::App* app, FlagValues* flags);
// After parsing: --set appended to the defaults' overrides, --mem-limit parsed, the host and
// elastic flags checked (--hosts/--hostfile without --nproc: nproc = their slots).
Status FinishTrainFlags(FlagValues* flags);

}  // namespace lockstep::api

namespace lockstep::api {

// `lockstep train`: lockstep::Train's launch, returning the command's exit status (mpirun's
// own when the run was relaunched under it).
int RunTrainCommand(const Job& job, const TrainOptions& options);

}  // namespace lockstep::api
