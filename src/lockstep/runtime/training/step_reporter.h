// StepReporter: what a run tells as it goes, from rank 0 — the rows of metrics.jsonl (start,
// resume, pipeline, one per training step, validations, skipped steps, checkpoints, memory,
// done), the progress line on stderr, the "done:" line on stdout, and the watch over uneven
// work (a straggler rank, the pipeline stages' measured balance against the partitioner's
// estimate). Only the lead rank has one: the Trainer gathers what it reports from the other
// ranks first (GatherStep, GatherEval, the memory rows), so nothing here is collective.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/core/result.h"
#include "lockstep/parallel/data_parallel.h"
#include "lockstep/parallel/pipeline_schedule.h"
#include "lockstep/runtime/metrics/metrics_log.h"
#include "lockstep/runtime/metrics/progress.h"
#include "lockstep/runtime/metrics/step_stats.h"
#include "lockstep/runtime/metrics/straggler.h"
#include "lockstep/runtime/recovery/async_checkpoint.h"
#include "lockstep/runtime/setup/run_setup.h"

namespace lockstep::runtime {

// What one training step measured, as its metrics row shows it.
struct StepFigures {
  int64_t step = 0;  // 1-based: the step just finished
  double loss = 0, lr = 0, grad_norm = 0;
  double step_ms = 0, data_ms = 0, compute_ms = 0, optim_ms = 0;
  parallel::SyncTimes sync;           // this rank's gradient synchronisation
  double train_flops_per_sample = 0;  // the model's forward + backward
  // Bytes this rank sent in the step's collectives over its dp, tp and pp groups, as the ring
  // algorithm of each counts them (comm/counting_communicator.h).
  int64_t comm_bytes = 0;
};

// What a row counts: tokens (text), images (a classifier) or samples, and how many per row.
struct RowUnits {
  int64_t per_row = 1;
  bool text = false;
  bool classifier = false;
};

class StepReporter {
 public:
  // Opens <out>/metrics.jsonl. keep_rows (a resumed run, or a supervised restart): the rows up
  // to start_step stay and those of the steps lost after it are dropped; else it starts empty.
  // `hosts`: every rank's host name in rank order, for naming a straggler.
  static Result<std::unique_ptr<StepReporter>> Open(const RunSetup& setup, int64_t start_step, bool keep_rows,
                                                    RowUnits units, std::vector<std::string> hosts);

  // The rows of a start: `start_row`, a resume row when the run resumed, and with a pipeline
  // its partition, micro-batches and `schedule` (the one the pipeline runner runs).
  Status Started(const nlohmann::json& start_row, parallel::PipeSchedule schedule);

  // A training step: its row, the progress line, then the straggler and stage-balance watch.
  Status Step(const StepFigures& f, const GatheredStep& gathered);
  // A step whose gradient or loss was not finite, skipped (train.skip_nonfinite).
  Status Skipped(int64_t step, const std::string& where, int64_t consecutive, const std::string& line);
  // A validation pass over `count` tokens, images or samples; acc is NaN for non-classifiers.
  Status Validation(int64_t step, double loss, double acc, int64_t count);
  Status Checkpoint(const SaveReport& r);
  // Any other row (memory rows).
  Status Write(const nlohmann::json& row) { return metrics_.Write(row); }
  // A line that must stay visible among the progress updates.
  void Print(const std::string& line) { progress_.Print(line); }
  // The end: the memory rows, the done row (the last line) and "done: ..." on stdout.
  Status Done(const std::vector<nlohmann::json>& memory_rows, const std::string& weights_xxh64, double val_loss,
              double val_acc);

 private:
  StepReporter(const RunSetup& setup, int64_t start_step, MetricsLog log, RowUnits units,
               std::vector<std::string> hosts);
  Status WatchStragglers(int64_t step, const GatheredStep& g);
  Status WatchStageBalance(int64_t step, const GatheredStep& g);

  const RunSetup& setup_;
  const int64_t start_step_;
  const bool pipeline_;
  const RowUnits units_;
  MetricsLog metrics_;
  Progress progress_;
  std::vector<std::string> hosts_;
  StragglerDetector stragglers_;
  StageBalanceMeter stage_balance_;
  bool stage_balance_reported_ = false;
};

}  // namespace lockstep::runtime
