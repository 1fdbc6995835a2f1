#include "lockstep/runtime/worker.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/autograd/tape.h"
#include "lockstep/core/clock.h"
#include "lockstep/core/hash.h"
#include "lockstep/core/log.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/nn/model.h"
#include "lockstep/optim/adamw.h"
#include "lockstep/optim/grad_clip.h"
#include "lockstep/optim/lr_schedule.h"
#include "lockstep/optim/sgd.h"
#include "lockstep/parallel/data_parallel.h"
#include "lockstep/parallel/zero.h"
#include "lockstep/profile/trace.h"
#include "lockstep/runtime/async_checkpoint.h"
#include "lockstep/runtime/checkpointing.h"
#include "lockstep/runtime/eval_loop.h"
#include "lockstep/runtime/heartbeat.h"
#include "lockstep/runtime/metrics_log.h"
#include "lockstep/runtime/progress.h"
#include "lockstep/runtime/shared_data.h"
#include "lockstep/runtime/step_stats.h"
#include "lockstep/runtime/supervisor.h"
#include "lockstep/runtime/weights_hash.h"
#include "lockstep/tensor/memory.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::runtime {
namespace {

// AdamW or SGD over `owned`: the whole flat buffer (every data-parallel rank steps all of
// it), or with ZeRO-1 this rank's shard of it.
class Optimizer {
 public:
  static Result<Optimizer> Create(const optim::OptimConfig& cfg, const nn::ParameterStore& params,
                                  optim::FlatRange all) {
    std::vector<optim::ParamGroupSpan> groups;
    for (const nn::ParamInfo& p : params) groups.push_back({p.offset, p.numel, p.decay});
    Optimizer o;
    if (cfg.kind == optim::OptimizerKind::kAdamW) {
      LS_ASSIGN_OR_RETURN(auto a, optim::AdamW::Create(cfg.adamw, groups, all));
      o.adamw_.emplace(std::move(a));
    } else {
      LS_ASSIGN_OR_RETURN(auto s, optim::Sgd::Create(cfg.sgd, groups, all));
      o.sgd_.emplace(std::move(s));
    }
    return o;
  }
  void Step(float* params, const float* grads, float lr) {
    if (adamw_) adamw_->Step(params, grads, lr);
    else sgd_->Step(params, grads, lr);
  }
  int64_t step() const { return adamw_ ? adamw_->step() : sgd_->step(); }
  void set_step(int64_t step) {
    if (adamw_) adamw_->set_step(step);
    else sgd_->set_step(step);
  }
  // Flat state buffers laid out like the parameters of the owned range, for checkpoints.
  std::vector<OptimizerStateBuffer> StateBuffers(int64_t begin) {
    if (adamw_) return {{"exp_avg", adamw_->mutable_m(), begin}, {"exp_avg_sq", adamw_->mutable_v(), begin}};
    if (sgd_->mutable_momentum_buffer().empty()) return {};
    return {{"momentum", sgd_->mutable_momentum_buffer(), begin}};
  }
  int64_t StateBytes(int64_t owned) const {
    const int64_t buffers = adamw_ ? 2 : (sgd_->momentum_buffer().empty() ? 0 : 1);
    return buffers * owned * static_cast<int64_t>(sizeof(float));
  }

 private:
  std::optional<optim::AdamW> adamw_;
  std::optional<optim::Sgd> sgd_;
};

float ScalarOf(const autograd::Variable& v) { return v.value().data<float>()[0]; }

class Trainer {
 public:
  Trainer(const TrainPlan& plan, std::shared_ptr<comm::Communicator> comm, const tensor::MemoryTracker* memory)
      : plan_(plan), comm_(std::move(comm)), rank_(comm_->rank()), world_(comm_->size()),
        config_(plan.config), trace_(comm_->rank(), !plan.options.trace_file.empty()), memory_(memory) {}

  Status Run();

 private:
  Status Setup();
  Status Resume();
  Status TrainStep(int64_t step);
  Status Validate(int64_t step);
  Status Save(int64_t step);
  Status SaveSharded(int64_t step);
  CheckpointContents Contents(int64_t step);
  nlohmann::json Layout() const {
    return {{"world", world_}, {"dp", world_}, {"tp", 1}, {"pp", 1}, {"zero", zero_}};
  }
  Status LogMemory();  // this rank's parameter, gradient and optimizer-state bytes
  nlohmann::json MemoryRow() const;
  // Logs checkpoints that finished writing in the background; `wait` blocks for one in flight.
  Status ReportSaves(bool wait);
  Status LogSave(const SaveReport& r);
  Status Finish();
  Status WriteTrace();
  // Runs fn() and records it on the trace as [start, end).
  template <typename Fn>
  auto Traced(const char* name, const char* cat, Fn&& fn) {
    int64_t start = NowNanos();
    if constexpr (std::is_void_v<decltype(fn())>) {
      fn();
      trace_.Add(name, cat, start, NowNanos());
    } else {
      auto r = fn();
      trace_.Add(name, cat, start, NowNanos());
      return r;
    }
  }
  bool lead() const { return rank_ == 0; }

  const TrainPlan& plan_;
  std::shared_ptr<comm::Communicator> comm_;
  int rank_, world_;
  Config config_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<RankData> data_;
  std::optional<Optimizer> optimizer_;
  std::optional<optim::LrSchedule> schedule_;
  std::unique_ptr<parallel::DataParallel> ddp_;
  autograd::Tape tape_;
  std::vector<float> contributions_;  // deterministic mode: one gradient per local shard
  std::vector<float> shard_losses_;
  std::optional<MetricsLog> metrics_;
  std::optional<Progress> progress_;
  double last_val_loss_ = NAN;
  double last_val_acc_ = NAN;
  profile::TraceRecorder trace_;
  int64_t origin_ns_ = 0;  // rank 0's start: the trace's time zero on every rank
  int64_t start_step_ = 0;  // steps already done (from the checkpoint resumed)
  Heartbeat heartbeat_{rank_};
  std::unique_ptr<AsyncCheckpointSaver> saver_;  // rank 0, replicated states
  const int zero_ = plan_.options.zero;           // ZeRO stage (0 or 1)
  optim::FlatRange owned_;                         // the part of the flat buffer this rank updates
  std::unique_ptr<parallel::ShardedParamGather> gather_;  // ZeRO-1: re-assembles the parameters
  const tensor::MemoryTracker* memory_;  // this rank's tensor bytes (installed by RunWorker)
};

Status Trainer::Setup() {
  tensor::SetComputeThreads(plan_.threads_per_worker);
  tensor::SetDeterministicCompute(plan_.options.deterministic);
  LS_ASSIGN_OR_RETURN(model_, nn::MakeModel(config_));
  LS_ASSIGN_OR_RETURN(data_, RankData::Create(plan_.data, plan_.run, rank_, world_));
  const int64_t numel = model_->params().numel();
  owned_ = zero_ > 0 ? parallel::ShardRange(numel, rank_, world_) : optim::FlatRange{0, numel};
  if (zero_ > 0) gather_ = std::make_unique<parallel::ShardedParamGather>(comm_, numel);
  LS_ASSIGN_OR_RETURN(Optimizer opt, Optimizer::Create(plan_.optim, model_->params(), owned_));
  optimizer_.emplace(std::move(opt));
  LS_ASSIGN_OR_RETURN(optim::LrSchedule sched, optim::LrSchedule::Create(plan_.optim.schedule));
  schedule_.emplace(sched);
  ddp_ = std::make_unique<parallel::DataParallel>(comm_, &model_->params(), plan_.run.train.bucket_bytes);
  if (!plan_.resume_dir.empty()) LS_RETURN_IF_ERROR(Resume());
  LS_RETURN_IF_ERROR(ddp_->BroadcastParameters());
  LS_RETURN_IF_ERROR(LogMemory());
  if (trace_.enabled()) {
    ddp_->set_trace(&trace_);
    origin_ns_ = NowNanos();
    if (world_ > 1) LS_RETURN_IF_ERROR(comm_->Broadcast(&origin_ns_, 1, comm::DType::kI64, 0)->Wait());
  }
  if (plan_.options.deterministic) {
    int64_t per_rank = plan_.run.train.det_shards / world_;
    contributions_.assign(static_cast<size_t>(per_rank * model_->params().numel()), 0.0f);
    shard_losses_.assign(static_cast<size_t>(per_rank), 0.0f);
  }
  if (lead()) {
    const std::string path = plan_.out_dir + "/metrics.jsonl";
    // A resumed run keeps the rows up to its checkpoint and drops what the lost steps wrote.
    const bool keep_rows = start_step_ > 0 || std::getenv(kRestartEnv) != nullptr;
    if (keep_rows) LS_RETURN_IF_ERROR(TrimMetricsAfter(path, start_step_));
    LS_ASSIGN_OR_RETURN(MetricsLog log, MetricsLog::Open(path, keep_rows));
    metrics_.emplace(std::move(log));
    progress_.emplace(plan_.total_steps, plan_.run.train.log_every);
    LS_LOG(INFO) << "training " << model_->name() << " (" << model_->params().numel() << " parameters) on "
                 << world_ << " worker(s), backend " << comm_->backend_name() << ", "
                 << plan_.threads_per_worker << " compute thread(s) each, " << plan_.total_steps << " steps"
                 << (plan_.options.deterministic ? ", deterministic" : "") << "; output in " << plan_.out_dir;
    if (start_step_ > 0) {
      LS_LOG(INFO) << "resumed from " << plan_.resume_dir << " at step " << start_step_;
      LS_RETURN_IF_ERROR(metrics_->Write({{"event", "resume"}, {"step", start_step_}, {"checkpoint", plan_.resume_dir}}));
    }
  }
  return Status::Ok();
}

// Every rank reads the whole (replicated) state; the reader verifies each checksum it touches.
Status Trainer::Resume() {
  LS_ASSIGN_OR_RETURN(CheckpointContents c, LoadTrainingState(plan_.resume_dir, TrajectoryHash(plan_.config),
                                                              &model_->params(), optimizer_->StateBuffers(owned_.begin)));
  if (c.step > plan_.total_steps)
    return Status::InvalidArgument(plan_.resume_dir + " is at step " + std::to_string(c.step) + ", past this run's " +
                                   std::to_string(plan_.total_steps) + " steps (pass a larger --steps)");
  optimizer_->set_step(c.optimizer_step);
  LS_RETURN_IF_ERROR(data_->Restore(c.loader));
  start_step_ = c.step;
  return Status::Ok();
}

Status Trainer::TrainStep(int64_t step) {
  Stopwatch step_clock;
  const TrainSection& t = plan_.run.train;
  const double global = static_cast<double>(t.batch_size);
  nn::ParameterStore& params = model_->params();

  Stopwatch data_clock;
  LS_RETURN_IF_ERROR(Traced("data", "data", [&] { return data_->NextTrain(); }));
  double data_ms = data_clock.ElapsedMs();
  const int64_t local = data_->train_rows();

  Stopwatch compute_clock;
  parallel::SyncTimes sync;
  double loss_part = 0;
  int64_t compute_end_ns = 0;
  if (plan_.options.deterministic) {
    // Every canonical shard's gradient is computed alone, in the same way on whichever rank
    // holds it, then all shards are summed in one fixed tree (docs/deterministic-data-parallel.md).
    const int64_t per_rank = t.det_shards / world_, shard = t.batch_size / t.det_shards;
    const int64_t n = params.numel();
    tape_.SetParamReadyHook(nullptr);
    for (int64_t k = 0; k < per_rank; ++k) {
      params.ZeroGrad();
      autograd::Variable loss =
          Traced("forward", "compute", [&] { return model_->Loss(tape_, data_->TrainRows(k * shard, shard)); });
      float scale = static_cast<float>(shard / global);
      shard_losses_[k] = ScalarOf(loss) * scale;
      Traced("backward", "compute", [&] { tape_.Backward(loss, scale); });
      std::memcpy(contributions_.data() + k * n, params.flat_grads(), n * sizeof(float));
    }
    compute_end_ns = NowNanos();
    LS_RETURN_IF_ERROR(Traced("deterministic allreduce", "comm",
                              [&] { return ddp_->SyncDeterministic(contributions_.data(), t.det_shards, &sync); }));
    float loss_total = 0;
    LS_RETURN_IF_ERROR(comm_->DeterministicAllreduceF32(shard_losses_.data(), &loss_total, 1, t.det_shards)->Wait());
    loss_part = rank_ == 0 ? loss_total : 0.0;
  } else {
    const int64_t micro = local / t.accum_steps;
    params.ZeroGrad();
    for (int64_t m = 0; m < t.accum_steps; ++m) {
      // Only the last micro-batch communicates (gradients accumulate locally before it).
      if (m + 1 == t.accum_steps) ddp_->Arm(tape_);
      else ddp_->Disarm(tape_);
      autograd::Variable loss =
          Traced("forward", "compute", [&] { return model_->Loss(tape_, data_->TrainRows(m * micro, micro)); });
      float scale = static_cast<float>(micro / global);
      loss_part += ScalarOf(loss) * static_cast<double>(scale);
      Traced("backward", "compute", [&] { tape_.Backward(loss, scale); });
    }
    compute_end_ns = NowNanos();
    ddp_->Disarm(tape_);
    LS_RETURN_IF_ERROR(Traced("wait for gradients", "wait", [&] { return ddp_->Finish(&sync); }));
  }
  // Compute time excludes the blocking wait at the end (exposed communication).
  double compute_ms = compute_clock.ElapsedMs() - sync.exposed_ms;

  LS_ASSIGN_OR_RETURN(GatheredStep gathered,
                      Traced("step stats", "comm", [&] { return GatherStep(*comm_, {loss_part, compute_end_ns}); }));

  Stopwatch optim_clock;
  const int64_t optim_clock_start = NowNanos();
  double grad_norm = optim::GlobalGradNorm(params.flat_grads(), params.numel());
  if (plan_.optim.grad_clip > 0)
    optim::ClipByGlobalNorm(params.flat_grads(), params.numel(), plan_.optim.grad_clip, grad_norm);
  float lr = schedule_->LrAt(step);
  if (saver_) saver_->WaitForSnapshot();  // an async save may still be copying the parameters
  optimizer_->Step(params.flat_params() + owned_.begin, params.flat_grads() + owned_.begin, lr);
  if (gather_) LS_RETURN_IF_ERROR(Traced("param all-gather", "comm", [&] { return gather_->Gather(params.flat_params()); }));
  trace_.Add("optimizer", "compute", optim_clock_start, NowNanos());
  double optim_ms = optim_clock.ElapsedMs();

  double step_ms = step_clock.ElapsedMs();
  if (lead()) {
    double samples_per_s = global / (step_ms * 1e-3);
    double tokens_per_s = samples_per_s * data_->units_per_row();
    double exposed = std::max(0.0, sync.exposed_ms - gathered.wait_ms);
    nlohmann::json row = {{"step", step + 1}, {"loss", gathered.loss}, {"lr", lr}, {"grad_norm", grad_norm},
                          {"tokens_per_s", tokens_per_s}, {"step_ms", step_ms},
                          {"data_ms", data_ms}, {"compute_ms", compute_ms}, {"optim_ms", optim_ms},
                          {"comm_ms", sync.comm_ms}, {"exposed_comm_ms", exposed},
                          {"wait_ms", std::min(gathered.wait_ms, sync.exposed_ms)},
                          {"gflops", model_->TrainFlopsPerSample() * global / (step_ms * 1e-3) * 1e-9}};
    if (!data_->is_text()) row["samples_per_s"] = samples_per_s;
    LS_RETURN_IF_ERROR(metrics_->Write(row));
    progress_->Step(step + 1, gathered.loss, lr, data_->is_text() ? tokens_per_s : samples_per_s,
                    data_->is_text() ? "tok/s" : "img/s");
  }
  if (!std::isfinite(gathered.loss))
    return Status::Aborted("loss is " + std::to_string(gathered.loss) + " at step " + std::to_string(step + 1) +
                           " (try a lower optim.lr or set optim.grad_clip)");
  return Status::Ok();
}

Status Trainer::Validate(int64_t step) {
  LS_ASSIGN_OR_RETURN(EvalSums mine, Traced("validation", "eval", [&] { return EvaluateLocal(*model_, *data_); }));
  LS_ASSIGN_OR_RETURN(EvalSums all, GatherEval(*comm_, mine));
  if (all.count == 0) return Status::InvalidArgument("the validation set is empty");
  last_val_loss_ = all.loss_sum / static_cast<double>(all.count);
  nlohmann::json row = {{"step", step}, {"val_loss", last_val_loss_}};
  char line[160];
  if (!data_->is_text()) {
    last_val_acc_ = static_cast<double>(all.correct) / static_cast<double>(all.count);
    row["val_acc"] = last_val_acc_;
    std::snprintf(line, sizeof(line), "step %lld: val_loss %.4f val_acc %.4f (%lld images)",
                  static_cast<long long>(step), last_val_loss_, last_val_acc_, static_cast<long long>(all.count));
  } else {
    std::snprintf(line, sizeof(line), "step %lld: val_loss %.4f (%lld tokens)", static_cast<long long>(step),
                  last_val_loss_, static_cast<long long>(all.count));
  }
  if (lead()) {
    LS_RETURN_IF_ERROR(metrics_->Write(row));
    progress_->Print(line);
  }
  return Status::Ok();
}

Status Trainer::Save(int64_t step) {
  if (zero_ > 0) return SaveSharded(step);
  if (!lead()) {  // data-parallel state is replicated: rank 0 writes it all
    InjectDuringCheckpoint(plan_.fault, rank_, step);
    return Status::Ok();
  }
  if (!saver_)
    saver_ = std::make_unique<AsyncCheckpointSaver>(plan_.out_dir + "/checkpoints",
                                                    static_cast<int>(plan_.run.checkpoint.keep), plan_.run.checkpoint.async);
  CheckpointContents c = Contents(step);
  std::vector<SaveReport> finished;
  const FaultSpec fault = plan_.fault;
  const int rank = rank_;
  LS_RETURN_IF_ERROR(saver_->Save(model_->params(), optimizer_->StateBuffers(0), c,
                                  [fault, rank, step] { InjectDuringCheckpoint(fault, rank, step); }, &finished));
  for (const SaveReport& r : finished) LS_RETURN_IF_ERROR(LogSave(r));
  return Status::Ok();
}

// This rank's bytes: parameters and gradients as lockstep's allocator counts them (the flat
// buffers), optimizer state from the optimizer's owned range (optim/ keeps it in plain
// vectors), and the peak of activation tensors so far.
nlohmann::json Trainer::MemoryRow() const {
  return {{"event", "memory"},
          {"rank", rank_},
          {"zero", zero_},
          {"parameters", model_->params().numel()},
          {"params_bytes", memory_->Current(tensor::MemoryTag::kParameter)},
          {"grads_bytes", memory_->Current(tensor::MemoryTag::kGradient)},
          {"optimizer_bytes", optimizer_->StateBytes(owned_.size())},
          {"peak_activation_bytes", memory_->Peak(tensor::MemoryTag::kActivation)}};
}

Status Trainer::LogMemory() {
  nlohmann::json row = MemoryRow();
  LS_LOG(INFO) << "memory: parameters " << row["params_bytes"] << " B, gradients " << row["grads_bytes"]
               << " B, optimizer state " << row["optimizer_bytes"] << " B (zero=" << zero_ << ")";
  return Status::Ok();
}

CheckpointContents Trainer::Contents(int64_t step) {
  CheckpointContents c;
  c.step = step;
  c.optimizer_step = optimizer_->step();
  c.loader = data_->State();
  c.config_hash = TrajectoryHash(plan_.config);
  c.rng = {{"kind", "philox4x32-10"}, {"seed", plan_.run.train.seed}};
  c.layout = Layout();
  return c;
}

// ZeRO: every rank writes its optimizer shard (rank 0 also the parameters), synchronously:
// the ranks must agree that every shard is on disk before rank 0 commits, and that agreement
// is a collective the training thread makes.
Status Trainer::SaveSharded(int64_t step) {
  Stopwatch clock;
  ShardWriteContext shard;
  shard.rank = rank_;
  shard.world = world_;
  shard.all_ok = [this](bool ok) {
    int32_t mine = ok ? 1 : 0, all = 0;
    Status s = comm_->Allreduce(&mine, &all, 1, comm::DType::kI32, comm::ReduceOp::kMin)->Wait();
    return s.ok() && all == 1;
  };
  const FaultSpec fault = plan_.fault;
  const int rank = rank_;
  std::vector<OptimizerStateBuffer> state = optimizer_->StateBuffers(owned_.begin);
  LS_RETURN_IF_ERROR(SaveCheckpointFrom(plan_.out_dir + "/checkpoints", static_cast<int>(plan_.run.checkpoint.keep),
                                        model_->params(), model_->params().flat_params(), state, Contents(step),
                                        [fault, rank, step] { InjectDuringCheckpoint(fault, rank, step); }, shard));
  if (!lead()) return Status::Ok();
  const double ms = clock.ElapsedMs();
  return LogSave({step, ms, ms, model_->params().numel() * 4 + optimizer_->StateBytes(model_->params().numel()), false});
}

Status Trainer::ReportSaves(bool wait) {
  if (!saver_) return Status::Ok();
  std::optional<Result<SaveReport>> r = wait ? saver_->Wait() : saver_->Poll();
  if (!r) return Status::Ok();
  if (!r->ok()) return r->status();
  return LogSave(**r);
}

// One metrics row per committed checkpoint: what the step waited (stall_ms) and what the
// write cost (write_ms, bytes, MB/s), so the async save's benefit is visible in every run.
Status Trainer::LogSave(const SaveReport& r) {
  const double mb_per_s = r.write_ms > 0 ? r.bytes / 1e6 / (r.write_ms / 1e3) : 0;
  char line[200];
  std::snprintf(line, sizeof(line), "step %lld: checkpoint saved (%.1f MB in %.0f ms, %.0f MB/s; step stalled %.1f ms)",
                static_cast<long long>(r.step), r.bytes / 1e6, r.write_ms, mb_per_s, r.stall_ms);
  progress_->Print(line);
  return metrics_->Write({{"event", "checkpoint"}, {"step", r.step}, {"async", r.async}, {"stall_ms", r.stall_ms},
                          {"write_ms", r.write_ms}, {"bytes", r.bytes}, {"mb_per_s", mb_per_s}});
}

// Every rank's events travel to rank 0 (size, then bytes), which writes one file.
Status Trainer::WriteTrace() {
  std::string mine = trace_.Serialize(origin_ns_);
  std::vector<std::string> all(world_);
  if (lead()) all[0] = std::move(mine);
  for (int r = 1; r < world_; ++r) {
    int64_t size = static_cast<int64_t>(mine.size());
    if (rank_ == r) {
      LS_RETURN_IF_ERROR(comm_->Send(&size, 1, comm::DType::kI64, 0, 7)->Wait());
      LS_RETURN_IF_ERROR(comm_->Send(mine.data(), mine.size(), comm::DType::kBytes, 0, 8)->Wait());
    } else if (lead()) {
      LS_RETURN_IF_ERROR(comm_->Recv(&size, 1, comm::DType::kI64, r, 7)->Wait());
      all[r].resize(static_cast<size_t>(size));
      LS_RETURN_IF_ERROR(comm_->Recv(all[r].data(), all[r].size(), comm::DType::kBytes, r, 8)->Wait());
    }
  }
  if (!lead()) return Status::Ok();
  LS_RETURN_IF_ERROR(profile::WriteChromeTrace(plan_.options.trace_file, all));
  progress_->Print("trace written to " + plan_.options.trace_file);
  return Status::Ok();
}

Status Trainer::Finish() {
  LS_RETURN_IF_ERROR(ReportSaves(/*wait=*/true));  // `done` only once the last checkpoint is committed
  if (trace_.enabled()) LS_RETURN_IF_ERROR(WriteTrace());
  std::string hash = WeightsXxh64(model_->params());
  if (!lead()) return Status::Ok();
  progress_->Finish();
  LS_RETURN_IF_ERROR(metrics_->Write(MemoryRow()));  // before `done`, which stays the last line
  LS_RETURN_IF_ERROR(metrics_->Write({{"event", "done"}, {"step", plan_.total_steps}, {"weights_xxh64", hash}}));
  std::printf("done: %lld steps, val_loss %.4f", static_cast<long long>(plan_.total_steps), last_val_loss_);
  if (!std::isnan(last_val_acc_)) std::printf(", val_acc %.4f", last_val_acc_);
  std::printf(", weights_xxh64 %s\n", hash.c_str());
  if (auto* gpt = dynamic_cast<nn::Gpt*>(model_.get())) {
    std::string sample = gpt->Generate("The ", 240, 0.8f, plan_.run.train.seed);
    std::printf("sample:\n%s\n", sample.c_str());
  }
  std::fflush(stdout);
  return Status::Ok();
}

Status Trainer::Run() {
  LS_RETURN_IF_ERROR(Setup());
  if (start_step_ == plan_.total_steps) LS_RETURN_IF_ERROR(Validate(start_step_));  // nothing left to train
  heartbeat_.Beat();
  for (int64_t step = start_step_; step < plan_.total_steps; ++step) {
    InjectAtStep(plan_.fault, rank_, step);
    LS_RETURN_IF_ERROR(TrainStep(step));
    heartbeat_.Beat();
    bool last = step + 1 == plan_.total_steps;
    if (last || (plan_.eval_every > 0 && (step + 1) % plan_.eval_every == 0))
      LS_RETURN_IF_ERROR(Validate(step + 1));
    const int64_t every = plan_.run.checkpoint.every;
    if (last || (every > 0 && (step + 1) % every == 0)) LS_RETURN_IF_ERROR(Save(step + 1));
    LS_RETURN_IF_ERROR(ReportSaves(/*wait=*/false));
    heartbeat_.Beat();
  }
  return Finish();
}

}  // namespace

Status RunWorker(const TrainPlan& plan, std::shared_ptr<comm::Communicator> comm) {
  if (comm->size() > 1) log::SetThreadPrefix("[rank " + std::to_string(comm->rank()) + "] ");
  // Each rank counts its own tensors (ranks may be threads of one process). The trainer and
  // every tensor it owns are gone before the tracker is.
  tensor::MemoryTracker memory;
  tensor::ScopedTracker scope(&memory);
  Status s;
  {
    Trainer trainer(plan, comm, &memory);
    s = trainer.Run();
  }
  // A failed rank must not leave its peers blocked in a collective until the timeout.
  if (!s.ok()) comm->Abort(s);
  return s;
}

}  // namespace lockstep::runtime
