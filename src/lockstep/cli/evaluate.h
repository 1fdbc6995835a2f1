// RunEvaluate: `lockstep eval --config FILE --checkpoint DIR` — loads a checkpoint's
// parameters into the config's model and prints validation loss (and accuracy) as JSON.
#pragma once

#include <string>
#include <vector>

#include "lockstep/core/status.h"

namespace lockstep::cli {

struct EvalOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string checkpoint_dir;
};

Status RunEvaluate(const EvalOptions& options);

}  // namespace lockstep::cli
