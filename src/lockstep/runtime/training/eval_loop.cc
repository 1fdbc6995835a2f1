#include "lockstep/runtime/training/eval_loop.h"

namespace lockstep::runtime {

Result<EvalSums> EvaluateLocal(RankData& data, const EvalBatchFn& eval_batch) {
  LS_RETURN_IF_ERROR(data.StartEval());
  EvalSums sums;
  while (true) {
    LS_ASSIGN_OR_RETURN(bool more, data.NextEval());
    if (!more) break;
    const int64_t rows = data.eval_rows();
    if (rows == 0) {
      // This rank's share of the last batch is all padding. It still runs one padding row
      // (ignored targets, result dropped): under ZeRO-3 every forward all-gathers parameters
      // with the other data-parallel ranks, which would wait forever for a rank that skipped.
      if (data.eval_batch_size() > 0) LS_RETURN_IF_ERROR(eval_batch(data.EvalRows(0, 1)).status());
      continue;
    }
    LS_ASSIGN_OR_RETURN(nn::EvalResult r, eval_batch(data.EvalRows(0, rows)));
    sums.loss_sum += r.loss_sum;
    sums.count += r.count;
    sums.correct += r.correct;
  }
  return sums;
}

}  // namespace lockstep::runtime
