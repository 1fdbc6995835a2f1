// The Trainer's watch over uneven work (trainer.h): the slow fault that makes a straggler on
// purpose, the straggler detector over every rank's compute time, and the pipeline stages'
// measured balance against the partitioner's estimate.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "lockstep/core/log.h"
#include "lockstep/runtime/setup/fault_spec.h"
#include "lockstep/runtime/training/trainer.h"

namespace lockstep::runtime {

// Every rank's host name, for the straggler warning (rank 0 keeps them).
Status Trainer::GatherHosts() {
  constexpr size_t kName = 64;
  char mine[kName] = {};
  if (::gethostname(mine, kName - 1) != 0) std::snprintf(mine, kName, "?");
  std::vector<char> all(kName * static_cast<size_t>(world_));
  if (world_ == 1)
    std::copy(mine, mine + kName, all.begin());
  else
    LS_RETURN_IF_ERROR(world_comm_->AllGather(mine, all.data(), kName, comm::DType::kBytes)->Wait());
  if (!lead()) return Status::Ok();
  for (int r = 0; r < world_; ++r) {
    const char* name = all.data() + kName * static_cast<size_t>(r);
    hosts_.emplace_back(name, strnlen(name, kName));
  }
  stragglers_.emplace(setup_.run.train.straggler_ratio, setup_.run.train.straggler_steps);
  return Status::Ok();
}

// --inject-fault slow: the slow rank sleeps (F - 1) x the time its forward and backward passes
// of the step took, so its compute takes F times as long. It sleeps once its passes are done
// but before its gradients leave: with DDP just before its last bucket is launched (the hook
// below), otherwise before the gradient synchronisation; its peers wait for it in the gradient
// collectives, as they would for a slower processor. Its passes run beside its peers' (a sleep
// before them would let them run alone, on a machine with fewer cores than ranks, and so
// faster). Pipeline stages stretch each pass instead (PipelineRunner::set_slow_factor).
void Trainer::BeginSlowStep(int64_t step) {
  slow_factor_ = SlowFactor(setup_.fault, rank_, step);
  compute_start_ns_ = NowNanos();
  slept_ = false;
  if (pipeline_) pipeline_->set_slow_factor(slow_factor_);
  if (slow_factor_ > 1.0 && ddp_) ddp_->set_before_last_launch([this] { SlowDown(); });
}

void Trainer::SlowDown() {
  if (slow_factor_ <= 1.0 || slept_) return;
  slept_ = true;
  const double passes_ms = (NowNanos() - compute_start_ns_) * 1e-6;
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>((slow_factor_ - 1.0) * passes_ms));
}

// Rank 0: names a rank whose compute time stayed above train.straggler_ratio x its peers'
// median over the last train.straggler_steps steps (straggler.h): one warning line and one
// metrics row. The first step after a start or resume (warm-up) is left out.
Status Trainer::WatchStragglers(int64_t step, const GatheredStep& g) {
  if (!stragglers_ || step == start_step_) return Status::Ok();
  for (const Straggler& s : stragglers_->Observe(g.compute_ms, g.peer_group)) {
    const std::string& host = hosts_[static_cast<size_t>(s.rank)];
    char line[256];
    std::snprintf(line, sizeof(line),
                  "straggler: rank %d on host %s computed %.2fx the median of its peers over the last %lld steps "
                  "(to step %lld: %.2f ms a step against %.2f ms); the others wait for it at every collective",
                  s.rank, host.c_str(), s.ratio, static_cast<long long>(setup_.run.train.straggler_steps),
                  static_cast<long long>(step + 1), s.compute_ms, s.median_ms);
    LS_LOG(WARN) << line;
    LS_RETURN_IF_ERROR(metrics_->Write({{"event", "straggler"},
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

// Rank 0, pp > 1: the stages' measured busy time against the cost the partitioner balanced,
// once, after train.straggler_steps steps (the first step, which warms caches and pools, not
// counted) or at the end of a shorter run. A stage whose measured share of the work is more
// than 20% off its estimated share gets a warning: the partitioner's cost model is wrong for
// this model or machine, and the pipeline idles more than `plan` predicted.
Status Trainer::WatchStageBalance(int64_t step, const GatheredStep& g) {
  if (!pipeline_ || !lead() || stage_balance_reported_) return Status::Ok();
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
  return metrics_->Write({{"event", "pipeline"},
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
