#include "lockstep/runtime/training/eval_loop.h"

namespace lockstep::runtime {

Result<EvalSums> EvaluateLocal(RankData& data, const EvalBatchFn& eval_batch) {
  LS_RETURN_IF_ERROR(data.StartEval());
  EvalSums sums;
  while (true) {
    LS_ASSIGN_OR_RETURN(bool more, data.NextEval());
    if (!more) break;
    const int64_t rows = data.eval_rows();
    if (rows == 0) continue;
    LS_ASSIGN_OR_RETURN(nn::EvalResult r, eval_batch(data.EvalRows(0, rows)));
    sums.loss_sum += r.loss_sum;
    sums.count += r.count;
    sums.correct += r.correct;
  }
  return sums;
}

}  // namespace lockstep::runtime
