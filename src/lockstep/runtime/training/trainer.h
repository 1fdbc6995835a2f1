// Trainer: one rank's training loop under any layout (internal to runtime/, used by
// RunWorker). The layout's pieces come from the device mesh: the rank's StageModel (its
// pipeline stage, split over its tensor-parallel group), the data of its data-parallel
// replica, an optimizer over its ZeRO shard. A step is
//   forward + backward   one pass (pp = 1; DDP buckets overlap the dp allreduce) or the
//                        pipeline schedule over micro-batches (pp > 1)
//   gradient sync        over the dp group: buckets / one allreduce, or in deterministic mode
//                        the fixed-tree sum of one gradient per canonical shard
//   norm, clip, update   exact global norm over every rank's unique elements, then the
//                        optimizer on the owned range and (ZeRO) the dp all-gather
// What rank 0 tells about the run (metrics rows, progress, stragglers) is the StepReporter's.
// Files: trainer.cc (set-up, loop, validation), train_step.cc (the step), trainer_state.cc
// (checkpoints, resume, memory, the final hash and sample), trainer_faults.cc (injected
// faults, and a step that is not finite).
#pragma once

#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/autograd/tape.h"
#include "lockstep/core/clock.h"
#include "lockstep/optim/exact_square_sum.h"
#include "lockstep/optim/lr_schedule.h"
#include "lockstep/parallel/canonical.h"
#include "lockstep/parallel/data_parallel.h"
#include "lockstep/parallel/diloco.h"
#include "lockstep/parallel/powersgd.h"
#include "lockstep/parallel/gpt_memory.h"
#include "lockstep/parallel/gpt_shard.h"
#include "lockstep/parallel/mesh.h"
#include "lockstep/parallel/stage_model.h"
#include "lockstep/parallel/tp_context.h"
#include "lockstep/parallel/zero.h"
#include "lockstep/parallel/zero_units.h"
#include "lockstep/runtime/metrics/step_stats.h"
#include "lockstep/runtime/recovery/heartbeat.h"
#include "lockstep/runtime/recovery/rank_checkpoints.h"
#include "lockstep/runtime/setup/rank_data.h"
#include "lockstep/runtime/setup/run_setup.h"
#include "lockstep/runtime/training/optimizer_state.h"
#include "lockstep/runtime/training/pipeline_runner.h"
#include "lockstep/runtime/training/step_reporter.h"
#include "lockstep/tensor/bf16_ops.h"
#include "lockstep/tensor/memory.h"
#include "lockstep/trace/trace.h"

namespace lockstep::runtime {

// What the forward/backward part of a step measured.
struct StepCompute {
  double loss_part = 0;        // this rank's share of the reported loss (0 on most ranks)
  int64_t compute_end_ns = 0;  // end of the backward pass(es)
  parallel::SyncTimes sync;    // gradient synchronization over dp
  PipelineTimes pipe;          // pp > 1
};

class Trainer {
 public:
  Trainer(const RunSetup& setup, std::shared_ptr<comm::Communicator> world, tensor::MemoryTracker* memory);
  ~Trainer();
  Status Run();

 private:
  // worker.cc
  Status Setup();
  Status BuildModel();
  Status CreateDiloco();
  Status CreatePowerSgd();
  Status ReserveOptimizerBytes(int64_t bytes, const char* what);
  Status CheckMemoryLimit();
  void LogStart();
  std::string Bf16Note() const;
  nlohmann::json StartRow() const;
  Status Validate(int64_t step);
  Result<EvalSums> EvaluateLocal();
  Status WriteTrace();
  // train_step.cc
  Status TrainStep(int64_t step);
  // The forward/backward and gradient sync of a step, one of the three below: chosen once in
  // Setup() from the layout and mode (compute_), not at every step.
  using ComputeFn = Status (Trainer::*)(StepCompute* c);
  Status SingleStageStep(StepCompute* c);
  Status DeterministicStep(StepCompute* c);
  Status PipelineStep(StepCompute* c);
  Status SumContributions(const float* shard_losses, double* loss);
  Status SyncContributions(parallel::SyncTimes* sync);
  Status AllreduceGrads(float* grads, int64_t n);
  Result<optim::ExactSquareSum> ReplicaSquares(const optim::ExactSquareSum& mine);
  // train.precision = bf16: rounds the weights into bf16_weights_ (after set-up and after each
  // update, the fixed points where they change), when the products run on bf16 kernels and
  // the rank holds a flat parameter buffer (ZeRO-3 rounds each gathered layer per product,
  // deterministic GPT runs each gathered slice). KeepsBf16Weights says whether it does;
  // Bf16WeightsFromTheUpdate gives the optimizer the copy's slots to fill as it updates the
  // weights (nullptr when it does not update all of them: ZeRO), saving the refresh's pass.
  bool KeepsBf16Weights();
  void RefreshBf16Weights();
  uint16_t* Bf16WeightsFromTheUpdate();
  bool bf16_grads() const { return setup_.run.train.grad_dtype == "bf16"; }
  int TiedParam() const;
  Status SumTiedGradients(int slots);
  // pp-group tag of the tied gradient exchange: above the pipeline's 2i, 2i+1 micro-batch tags.
  static constexpr int kTiedGradTag = 32001;
  optim::ExactSquareSum GradSquares();
  template <typename Fn>
  void ForEachCountedGrad(Fn&& fn);
  void InjectNonFiniteGrad();
  Status HandleNonFinite(int64_t step, double loss, double grad_norm);
  std::string NonFiniteWhere();
  // trainer_state.cc
  Status Resume();
  Status Save(int64_t step);
  CheckpointContents Contents(int64_t step);
  nlohmann::json Layout() const;
  static constexpr int kMemoryFields = 6;  // parameters, params/grads/optimizer bytes, peaks
  nlohmann::json MemoryRow();
  nlohmann::json MemoryRowOf(int rank, const int64_t* fields) const;
  Result<std::vector<nlohmann::json>> GatherMemoryRows(int64_t step);
  Status WriteMemoryRows(int64_t step);
  Status ReportSaves(bool wait);
  Status Finish();
  std::vector<parallel::LocalPiece> WeightPieces();
  // trainer_faults.cc: the slow fault, and a gradient or loss that is not finite
  void BeginSlowStep(int64_t step);
  void SlowDown();
  Result<std::vector<std::string>> GatherHosts();

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
  // Whether the model states are split over ranks (ZeRO, tp, pp), so that several ranks write
  // checkpoints; otherwise rank 0 holds and writes everything.
  bool sharded_state() const {
    return zero_ > 0 || dims().tp > 1 || dims().pp > 1 || replicas_differ() || (powersgd_ && dims().dp > 1);
  }
  // DiLoCo: the dp replicas hold different parameters and optimizer states between their
  // synchronisations, so each keeps its own gradient norm and writes its own state.
  bool replicas_differ() const { return diloco_ != nullptr && dims().dp > 1; }
  // PowerSGD compresses this step's gradients (from train.powersgd_start_step on).
  bool compressing() const { return powersgd_ != nullptr && step_ >= setup_.run.train.powersgd_start_step; }
  // The optimizer-side buffers this rank writes to (saving) or reads from (loading) checkpoints:
  // its optimizer state and, under DiLoCo, the outer state (written by dp rank 0) and a
  // replica's own parameters and inner state (replicas other than 0, under "replica<R>.").
  std::vector<OptimizerStateBuffer> CheckpointBuffers(bool saving);
  // DiLoCo: the outer step after the inner update of `step` (train_step.cc).
  Status OuterStep(int64_t step);
  const parallel::ParallelDims& dims() const { return setup_.layout.dims; }
  // Whether this rank reports the loss and validation sums of its replica (one per replica).
  bool reports_loss() const { return model_->last_stage() && mesh_.coord.tp == 0; }
  int64_t local_numel() const { return model_->params().numel(); }
  // The owned elements of the parameters and gradients the optimizer steps: views into the
  // flat buffers (zero 0/1), or the ZeRO-2/3 shards.
  float* OwnedParams();
  float* OwnedGrads();
  parallel::GptShardOptions StageOptions() const;
  Result<std::unique_ptr<parallel::StageModel>> MakeStage(bool flat_params, bool flat_grads) const;
  int64_t ModelParamCount() const;
  // GPT only: the activations this rank keeps for backward at its peak (one micro-batch's,
  // times the micro-batches a pipeline stage holds at once), by layer kind
  // (parallel/gpt_memory.h); `in_flight` and `rows` say how it was counted.
  parallel::ActivationBytes ActivationEstimate(int* in_flight, int64_t* rows) const;
  // The parameter values this rank holds (the whole local buffer, or the ZeRO-3 shard), and
  // the part of them it writes to checkpoints and the weights hash: everything on dp rank 0,
  // nothing on other replicas, its shard under ZeRO-3.
  ParamSpan HeldParams();
  ParamSpan WrittenParams();

  const RunSetup& setup_;
  std::shared_ptr<comm::Communicator> world_comm_;
  int rank_, world_;
  Config config_;
  parallel::DeviceMesh mesh_;
  std::unique_ptr<parallel::TpContext> tp_;
  std::unique_ptr<parallel::StageModel> model_;
  std::unique_ptr<RankData> data_;
  std::optional<OptimizerState> optimizer_;
  std::optional<optim::LrSchedule> schedule_;
  std::unique_ptr<parallel::DataParallel> ddp_;  // over the dp group
  std::unique_ptr<PipelineRunner> pipeline_;     // pp > 1
  ComputeFn compute_ = nullptr;                  // PipelineStep, DeterministicStep or SingleStageStep
  autograd::Tape tape_;
  std::vector<float> contributions_;  // deterministic mode: one gradient per local shard
  std::vector<float> shard_losses_;
  tensor::Bf16WeightCopy bf16_weights_;     // train.precision = bf16
  std::unique_ptr<StepReporter> reporter_;  // rank 0: metrics rows, progress, stragglers
  double last_val_loss_ = NAN;
  double last_val_acc_ = NAN;
  trace::TraceRecorder trace_;
  int64_t origin_ns_ = 0;   // rank 0's start: the trace's time zero on every rank
  int64_t start_step_ = 0;  // steps already done (from the checkpoint resumed)
  Heartbeat heartbeat_{rank_};
  std::optional<RankCheckpoints> checkpoints_;  // this rank's checkpoint I/O
  const int zero_ = setup_.options.zero;
  optim::FlatRange owned_;                                // the part of the local flat buffer this rank updates
  std::unique_ptr<parallel::ShardedParamGather> gather_;  // ZeRO-1/2: re-assembles the parameters
  std::unique_ptr<parallel::ZeroUnits> zero_units_;       // ZeRO-2/3: unit-wise gradients (and parameters)
  std::unique_ptr<parallel::DilocoSync> diloco_;          // train.sync = "diloco"
  std::unique_ptr<parallel::PowerSgd> powersgd_;          // train.grad_compression = "powersgd"
  int64_t step_ = 0;                                      // the step being taken (0-based)
  tensor::MemoryTracker* memory_;
  int64_t optimizer_reserved_ = 0;      // optimizer-state bytes counted in memory_ (optim/ uses plain vectors)
  // (the DiLoCo anchor and outer momentum are counted there too)
  int64_t contributions_reserved_ = 0;  // contributions_ bytes counted in memory_
  // Activation bytes alive when the first backward of this start begins: what the forward
  // saved, measured before the pool holds any idle buffers (-1 until then; one stage only).
  int64_t saved_activation_bytes_ = -1;
  // Rows of one forward/backward pass of the step: a pipeline micro-batch, a canonical shard
  // (deterministic mode), or the local batch split by train.accum_steps. Validation compares
  // its batches with it to know whether the step's pooled buffers fit them.
  int64_t MicroRows() const;
  void NoteSavedActivations() {
    if (saved_activation_bytes_ < 0) saved_activation_bytes_ = memory_->Current(tensor::MemoryTag::kActivation);
  }
  // --inject-fault slow: this step's factor on this rank (1: none), when its compute began,
  // whether it has slept in this step.
  double slow_factor_ = 1.0;
  int64_t compute_start_ns_ = 0;
  bool slept_ = false;
  int64_t consecutive_skips_ = 0;  // non-finite steps skipped in a row (train.skip_nonfinite)
  // Bytes the mesh's groups sent since the step began (comm/counting_communicator.h).
  std::shared_ptr<std::atomic<int64_t>> comm_bytes_ = std::make_shared<std::atomic<int64_t>>(0);
};

// fn(param index, pointer, count) over the reduced gradient elements this rank counts in the
// global norm: its dp shard of its local buffer (the replicas hold the same reduced
// gradient), skipping tensors replicated over tp on tp ranks other than 0. Every unique
// element of the world's gradient is visited on exactly one rank.
template <typename Fn>
inline void Trainer::ForEachCountedGrad(Fn&& fn) {
  const nn::ParameterStore& ps = model_->params();
  // (DiLoCo: the replicas' gradients differ; each rank counts its whole buffer.)
  const optim::FlatRange mine = replicas_differ() ? optim::FlatRange{0, local_numel()}
                                                  : parallel::ShardRange(local_numel(), mesh_.coord.dp, dims().dp);
  // Element `flat` of the reduced gradient: in the flat buffer, or (ZeRO-2/3, where only the
  // owned range exists, which is `mine`) in the shard.
  float* base = zero_units_ ? zero_units_->grad_shard() : model_->params().flat_grads();
  const int64_t base_begin = zero_units_ ? mine.begin : 0;
  for (int i = 0; i < ps.size(); ++i) {
    if (model_->placements()[i].tp_replicated && mesh_.coord.tp != 0) continue;
    if (model_->placements()[i].tied_copy) continue;  // counted where its owner is
    const nn::ParamInfo& p = ps.info(i);
    const int64_t lo = std::max(mine.begin, p.offset), hi = std::min(mine.end, p.offset + p.numel);
    if (lo < hi) fn(i, base + (lo - base_begin), hi - lo);
  }
}

}  // namespace lockstep::runtime
