// One pass over this rank's share of the validation set (every rank makes the same number
// of loader calls; masked padding rows are never fed to the model). `lockstep eval` and the
// trainer's validation both run it; they differ only in how a batch is evaluated.
#pragma once

#include <functional>

#include "lockstep/nn/model.h"
#include "lockstep/runtime/metrics/step_stats.h"
#include "lockstep/runtime/setup/rank_data.h"

namespace lockstep::runtime {

// Evaluates one batch of real rows; returns the sums this rank contributes (zero sums on a
// rank that does not report its replica's loss).
using EvalBatchFn = std::function<Result<nn::EvalResult>(const nn::ModelInput& rows)>;

Result<EvalSums> EvaluateLocal(RankData& data, const EvalBatchFn& eval_batch);

}  // namespace lockstep::runtime
