#include "lockstep/runtime/training/step_reporter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lockstep/core/log.h"
#include "lockstep/parallel/pipeline_schedule.h"

namespace lockstep::runtime {

Result<std::unique_ptr<StepReporter>> StepReporter::Open(const RunSetup& setup, int64_t start_step, bool keep_rows,
                                                         RowUnits units, std::vector<std::string> hosts) {
  const std::string path = setup.out_dir + "/metrics.jsonl";
  if (keep_rows) LS_RETURN_IF_ERROR(TrimMetricsAfter(path, start_step));
  LS_ASSIGN_OR_RETURN(MetricsLog log, MetricsLog::Open(path, keep_rows));
  return std::unique_ptr<StepReporter>(new StepReporter(setup, start_step, std::move(log), units, std::move(hosts)));
}

StepReporter::StepReporter(const RunSetup& setup, int64_t start_step, MetricsLog log, RowUnits units,
                           std::vector<std::string> hosts)
    : setup_(setup),
      start_step_(start_step),
      pipeline_(setup.layout.dims.pp > 1),
      units_(units),
      metrics_(std::move(log)),
      progress_(setup.total_steps, setup.run.train.log_every),
      hosts_(std::move(hosts)),
      stragglers_(setup.run.train.straggler_ratio, setup.run.train.straggler_steps) {}

Status StepReporter::Started(const nlohmann::json& start_row, parallel::PipeSchedule schedule) {
  LS_RETURN_IF_ERROR(metrics_.Write(start_row));
  if (start_step_ > 0) {
    LS_LOG(INFO) << "resumed from " << setup_.resume_dir << " at step " << start_step_;
    LS_RETURN_IF_ERROR(metrics_.Write({{"event", "resume"}, {"step", start_step_}, {"checkpoint", setup_.resume_dir}}));
  }
  if (!pipeline_) return Status::Ok();
  const RunLayout& layout = setup_.layout;
  const parallel::StagePartition& p = layout.partition;
  const double formula = parallel::BubbleFormula(layout.dims.pp, layout.pp_micros);
  LS_LOG(INFO) << "pipeline: " << parallel::DescribePartition(p) << "; " << layout.pp_micros << " micro-batches, "
               << parallel::PipeScheduleName(schedule) << ", bubble (p-1)/(m+p-1) = " << formula;
  return metrics_.Write({{"event", "pipeline"},
                         {"stages", p.begin},
                         {"cost", p.cost},
                         {"imbalance", p.imbalance},
                         {"micro_batches", layout.pp_micros},
                         {"schedule", parallel::PipeScheduleName(schedule)},
                         {"bubble_formula", formula}});
}

Status StepReporter::Step(const StepFigures& f, const GatheredStep& g) {
  const double global = static_cast<double>(setup_.run.train.batch_size);
  const double samples_per_s = global / (f.step_ms * 1e-3);
  const double tokens_per_s = samples_per_s * static_cast<double>(units_.per_row);
  // Communication this rank waited for beyond its wait for the slowest rank's backward.
  const double exposed = std::max(0.0, f.sync.exposed_ms - g.wait_ms);
  nlohmann::json row = {{"step", f.step},
                        {"loss", g.loss},
                        {"lr", f.lr},
                        {"grad_norm", f.grad_norm},
                        {"tokens_per_s", tokens_per_s},
                        {"step_ms", f.step_ms},
                        {"data_ms", f.data_ms},
                        {"compute_ms", f.compute_ms},
                        {"optim_ms", f.optim_ms},
                        {"comm_ms", f.sync.comm_ms},
                        {"exposed_comm_ms", exposed},
                        {"wait_ms", std::min(g.wait_ms, f.sync.exposed_ms)},
                        {"comm_bytes", f.comm_bytes},
                        {"gflops", f.train_flops_per_sample * global / (f.step_ms * 1e-3) * 1e-9}};
  if (!units_.text) row["samples_per_s"] = samples_per_s;
  // A loss mask: how many of the global batch's targets the loss counted.
  if (setup_.run.data.loss_mask) row["trained_tokens"] = g.trained_targets;
  row["rank_compute_ms"] = g.compute_ms;  // per rank, in rank order (the straggler view)
  row["rank_wait_ms"] = g.rank_wait_ms;
  if (pipeline_) {
    row["pp_bubble"] = g.mean_bubble;
    row["pp_bubble_bottleneck"] = g.bottleneck_bubble;
    row["pp_busy_ms"] = g.busy_ms;  // per rank: which stage is the bottleneck
    row["pp_bubble_formula"] = parallel::BubbleFormula(setup_.layout.dims.pp, setup_.layout.pp_micros);
  }
  LS_RETURN_IF_ERROR(metrics_.Write(row));
  progress_.Step(f.step, g.loss, f.lr, units_.text ? tokens_per_s : samples_per_s,
                 units_.text         ? "tok/s"
                 : units_.classifier ? "img/s"
                                     : "samples/s");
  LS_RETURN_IF_ERROR(WatchStragglers(f.step - 1, g));
  return WatchStageBalance(f.step - 1, g);
}

Status StepReporter::Skipped(int64_t step, const std::string& where, int64_t consecutive, const std::string& line) {
  LS_RETURN_IF_ERROR(
      metrics_.Write({{"step", step}, {"skipped", "nonfinite_grad"}, {"where", where}, {"consecutive", consecutive}}));
  LS_LOG(WARN) << line;
  return Status::Ok();
}

Status StepReporter::Validation(int64_t step, double loss, double acc, int64_t count) {
  nlohmann::json row = {{"step", step}, {"val_loss", loss}};
  char line[160];
  if (units_.classifier) {
    row["val_acc"] = acc;
    std::snprintf(line, sizeof(line), "step %lld: val_loss %.4f val_acc %.4f (%lld images)",
                  static_cast<long long>(step), loss, acc, static_cast<long long>(count));
  } else {
    if (units_.text) row["val_tokens"] = count;  // the targets counted (a loss mask leaves some out)
    std::snprintf(line, sizeof(line), "step %lld: val_loss %.4f (%lld %s)", static_cast<long long>(step), loss,
                  static_cast<long long>(count), units_.text ? "tokens" : "samples");
  }
  LS_RETURN_IF_ERROR(metrics_.Write(row));
  progress_.Print(line);
  return Status::Ok();
}

// One row per committed checkpoint: what the step waited (stall_ms) and what the write cost
// (write_ms, bytes, MB/s), so the async save's benefit is visible in every run.
Status StepReporter::Checkpoint(const SaveReport& r) {
  const double mb_per_s = r.write_ms > 0 ? r.bytes / 1e6 / (r.write_ms / 1e3) : 0;
  char line[200];
  std::snprintf(line, sizeof(line), "step %lld: checkpoint saved (%.1f MB in %.0f ms, %.0f MB/s; step stalled %.1f ms)",
                static_cast<long long>(r.step), r.bytes / 1e6, r.write_ms, mb_per_s, r.stall_ms);
  progress_.Print(line);
  return metrics_.Write({{"event", "checkpoint"},
                         {"step", r.step},
                         {"async", r.async},
                         {"stall_ms", r.stall_ms},
                         {"write_ms", r.write_ms},
                         {"bytes", r.bytes},
                         {"mb_per_s", mb_per_s}});
}

Status StepReporter::Done(const std::vector<nlohmann::json>& memory_rows, const std::string& weights_xxh64,
                          double val_loss, double val_acc) {
  progress_.Finish();
  for (const nlohmann::json& row : memory_rows) LS_RETURN_IF_ERROR(metrics_.Write(row));  // before `done`, the last
  LS_RETURN_IF_ERROR(
      metrics_.Write({{"event", "done"}, {"step", setup_.total_steps}, {"weights_xxh64", weights_xxh64}}));
  std::printf("done: %lld steps, val_loss %.4f", static_cast<long long>(setup_.total_steps), val_loss);
  if (!std::isnan(val_acc)) std::printf(", val_acc %.4f", val_acc);
  std::printf(", weights_xxh64 %s\n", weights_xxh64.c_str());
  return Status::Ok();
}

// Names a rank whose compute time stayed above train.straggler_ratio x its peers' median over
// the last train.straggler_steps steps (straggler.h): one warning line and one metrics row. The
// first step after a start or resume (warm-up) is left out.
Status StepReporter::WatchStragglers(int64_t step, const GatheredStep& g) {
  if (step == start_step_) return Status::Ok();
  for (const Straggler& s : stragglers_.Observe(g.compute_ms, g.peer_group)) {
    const std::string& host = hosts_[static_cast<size_t>(s.rank)];
    char line[256];
    std::snprintf(line, sizeof(line),
                  "straggler: rank %d on host %s computed %.2fx the median of its peers over the last %lld steps "
                  "(to step %lld: %.2f ms a step against %.2f ms); the others wait for it at every collective",
                  s.rank, host.c_str(), s.ratio, static_cast<long long>(setup_.run.train.straggler_steps),
                  static_cast<long long>(step + 1), s.compute_ms, s.median_ms);
    LS_LOG(WARN) << line;
    LS_RETURN_IF_ERROR(metrics_.Write({{"event", "straggler"},
                                       {"step", step + 1},
                                       {"rank", s.rank},
                                       {"host", host},
                                       {"ratio", s.ratio},
                                       {"steps", setup_.run.train.straggler_steps},
                                       {"compute_ms", s.compute_ms},
                                       {"median_ms", s.median_ms}}));
  }
  return Status::Ok();
}

// pp > 1: the stages' measured busy time against the cost the partitioner balanced, once,
// after train.straggler_steps steps (the first step, which warms caches and pools, not
// counted) or at the end of a shorter run. A stage whose measured share of the work is more
// than 20% off its estimated share gets a warning: the partitioner's cost model is wrong for
// this model or machine, and the pipeline idles more than `plan` predicted.
Status StepReporter::WatchStageBalance(int64_t step, const GatheredStep& g) {
  if (!pipeline_ || stage_balance_reported_) return Status::Ok();
  if (step > start_step_) stage_balance_.Add(g.busy_ms, g.peer_group);
  const bool last = step + 1 == setup_.total_steps;
  if (stage_balance_.steps() < setup_.run.train.straggler_steps && !(last && stage_balance_.steps() > 0))
    return Status::Ok();
  stage_balance_reported_ = true;
  const parallel::StagePartition& p = setup_.layout.partition;
  const StageBalance b = stage_balance_.Compare(p.cost);
  if (b.measured_share.empty()) return Status::Ok();
  constexpr double kTolerance = 0.2;
  char line[320];
  std::snprintf(line, sizeof(line),
                "pipeline: measured stage imbalance %.1f%% (estimate %.1f%%) over %lld steps; stage %d did %.1f%% of "
                "the work, estimated %.1f%%",
                100 * b.measured_imbalance, 100 * p.imbalance, static_cast<long long>(stage_balance_.steps()),
                b.worst_stage, 100 * b.measured_share[b.worst_stage], 100 * b.estimated_share[b.worst_stage]);
  if (b.worst_error > kTolerance)
    LS_LOG(WARN) << line << ": more than 20% off the partitioner's estimate";
  else
    LS_LOG(INFO) << line;
  return metrics_.Write({{"event", "pipeline"},
                         {"step", step + 1},
                         {"steps_measured", stage_balance_.steps()},
                         {"measured_share", b.measured_share},
                         {"estimated_share", b.estimated_share},
                         {"measured_imbalance", b.measured_imbalance},
                         {"imbalance", p.imbalance},
                         {"worst_stage", b.worst_stage},
                         {"worst_error", b.worst_error},
                         {"warning", b.worst_error > kTolerance}});
}

}  // namespace lockstep::runtime
