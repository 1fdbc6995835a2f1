// RunEvaluate: `lockstep eval --config FILE --checkpoint DIR` — loads a checkpoint's
// parameters into the config's model and prints validation loss (and accuracy) as JSON.
#pragma once

#include "lockstep/core/status.h"
#include "lockstep/runtime/launch/train_options.h"

namespace lockstep::runtime {

Status RunEvaluate(const EvalOptions& options);

}  // namespace lockstep::runtime
