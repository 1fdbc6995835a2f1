// One pass over this rank's share of the validation set (every rank makes the same number
// of loader calls; masked padding rows are never fed to the model).
#pragma once

#include "lockstep/nn/model.h"
#include "lockstep/runtime/reporting/step_stats.h"
#include "lockstep/runtime/training/shared_data.h"

namespace lockstep::runtime {

Result<EvalSums> EvaluateLocal(nn::Model& model, RankData& data);

}  // namespace lockstep::runtime
