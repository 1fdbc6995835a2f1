// One training step of the Trainer (trainer.h): forward/backward for the layout, gradient
// synchronization over the data-parallel group, the exact global norm, clipping, the update.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "lockstep/core/bf16.h"
#include "lockstep/core/log.h"
#include "lockstep/optim/grad_clip.h"
#include "lockstep/runtime/setup/fault_spec.h"
#include "lockstep/runtime/training/trainer.h"

namespace lockstep::runtime {
namespace {

float ScalarOf(const autograd::Variable& v) { return v.value().data<float>()[0]; }

}  // namespace

// pp = 1, default mode: micro-batches accumulate locally and only the last one's backward
// launches the DDP bucket allreduces (over the dp group) as gradients become final.
Status Trainer::SingleStageStep(StepCompute* c) {
  const TrainSection& t = setup_.run.train;
  const double global = static_cast<double>(t.batch_size);
  const int64_t micro = MicroRows();
  nn::ParameterStore& params = model_->params();
  params.ZeroGrad();
  if (zero_units_) zero_units_->BeginStep();  // ZeRO-2/3 reduce unit by unit instead of buckets
  double loss_sum = 0;
  // DiLoCo: a replica's gradient is the mean over its own rows, and nothing is reduced.
  const double replica_batch = replicas_differ() ? global / dims().dp : global;
  for (int64_t m = 0; m < t.accum_steps; ++m) {
    if (m + 1 == t.accum_steps && !zero_units_ && !replicas_differ() && !compressing())
      ddp_->Arm(tape_);
    else
      ddp_->Disarm(tape_);
    autograd::Variable loss =
        Traced("forward", "compute", [&] { return model_->Forward(tape_, data_->TrainRows(m * micro, micro), {}); });
    NoteSavedActivations();
    const float scale = static_cast<float>(micro / global);
    loss_sum += ScalarOf(loss) * static_cast<double>(scale);
    Traced("backward", "compute", [&] { tape_.Backward(loss, static_cast<float>(micro / replica_batch)); });
  }
  SlowDown();  // if the last bucket's launch did not already
  c->compute_end_ns = NowNanos();
  ddp_->Disarm(tape_);
  if (zero_units_) {
    Stopwatch wait;
    LS_RETURN_IF_ERROR(Traced("wait for gradients", "wait", [&] { return zero_units_->FinishStep(); }));
    c->sync.exposed_ms = wait.ElapsedMs();
  } else if (compressing()) {
    // Reduce rewrites the error feedback and Q, which an asynchronous save may still be copying.
    checkpoints_->WaitForSnapshot();
    Stopwatch clock;
    float* g = params.flat_grads();
    LS_RETURN_IF_ERROR(Traced("powersgd", "comm", [&] { return powersgd_->Reduce(&g, g); }));
    c->sync.comm_ms = c->sync.exposed_ms = clock.ElapsedMs();
  } else if (!replicas_differ()) {
    LS_RETURN_IF_ERROR(Traced("wait for gradients", "wait", [&] { return ddp_->Finish(&c->sync); }));
  }
  c->loss_part = reports_loss() ? loss_sum : 0.0;
  return Status::Ok();
}

// Deterministic mode: the V canonical shard gradients summed in the fixed tree over dp, into
// the flat gradient buffer (or, ZeRO-2/3, the rank's gradient shard).
Status Trainer::SyncContributions(parallel::SyncTimes* sync) {
  // train.grad_dtype = bf16: every canonical shard's gradient is rounded to bf16 before the
  // tree sums them (in fp32): a fixed point before any reduction, so the bits stay the same
  // whatever the world size and layout.
  if (bf16_grads()) {
    const int64_t n = static_cast<int64_t>(contributions_.size());
    tensor::RoundThroughBf16(contributions_.data(), n, contributions_.data(), n, 1, n);
  }
  if (compressing()) {
    // PowerSGD: every canonical shard is a slot with its own error feedback.
    const int64_t n = local_numel(), shards = setup_.run.train.det_shards / dims().dp;
    std::vector<float*> slots(static_cast<size_t>(shards));
    for (int64_t k = 0; k < shards; ++k) slots[static_cast<size_t>(k)] = contributions_.data() + k * n;
    checkpoints_->WaitForSnapshot();  // (as in SingleStageStep: the save may still copy the state)
    Stopwatch clock;
    Status s =
        Traced("powersgd", "comm", [&] { return powersgd_->Reduce(slots.data(), model_->params().flat_grads()); });
    sync->comm_ms = sync->exposed_ms = clock.ElapsedMs();
    return s;
  }
  if (replicas_differ()) {
    // DiLoCo: the replica's own shards summed in the same fixed tree, locally.
    const int64_t n = local_numel(), shards = setup_.run.train.det_shards / dims().dp;
    std::vector<const float*> inputs(static_cast<size_t>(shards));
    for (int64_t k = 0; k < shards; ++k) inputs[static_cast<size_t>(k)] = contributions_.data() + k * n;
    comm::DeterministicTreeSum(inputs.data(), shards, model_->params().flat_grads(), static_cast<size_t>(n));
    return Status::Ok();
  }
  return Traced("deterministic allreduce", "comm", [&] {
    if (zero_units_) {
      Stopwatch clock;
      Status s = zero_units_->ReduceContributions(contributions_.data(), setup_.run.train.det_shards);
      sync->comm_ms = sync->exposed_ms = clock.ElapsedMs();
      return s;
    }
    return ddp_->SyncDeterministic(contributions_.data(), setup_.run.train.det_shards, sync);
  });
}

// The V shard losses (this replica's V/dp of them, already scaled) summed in the fixed tree
// over the dp group: the same reported loss whatever dp is.
Status Trainer::SumContributions(const float* shard_losses, double* loss) {
  float total = 0;
  LS_RETURN_IF_ERROR(mesh_.dp->DeterministicAllreduceF32(shard_losses, &total, 1, setup_.run.train.det_shards)->Wait());
  *loss = total;
  return Status::Ok();
}

// pp = 1, deterministic: every canonical shard's gradient is computed alone, the same way on
// whichever replica holds it, then all shards are summed in one fixed tree
// (docs/deterministic-data-parallel.md).
Status Trainer::DeterministicStep(StepCompute* c) {
  const TrainSection& t = setup_.run.train;
  const int64_t per_rank = t.det_shards / dims().dp, shard = MicroRows();
  const int64_t n = local_numel();
  nn::ParameterStore& params = model_->params();
  tape_.SetParamReadyHook(nullptr);
  const float scale = static_cast<float>(static_cast<double>(shard) / static_cast<double>(t.batch_size));
  // DiLoCo: the gradient is the mean over the replica's own rows (the loss keeps the global scale).
  const float grad_scale =
      replicas_differ() ? static_cast<float>(static_cast<double>(shard) * dims().dp / static_cast<double>(t.batch_size))
                        : scale;
  for (int64_t k = 0; k < per_rank; ++k) {
    params.ZeroGrad();
    float* slot = contributions_.data() + k * n;
    if (zero_units_) zero_units_->SetContribution(slot);  // each unit's gradient lands there
    autograd::Variable loss =
        Traced("forward", "compute", [&] { return model_->Forward(tape_, data_->TrainRows(k * shard, shard), {}); });
    NoteSavedActivations();
    shard_losses_[k] = ScalarOf(loss) * scale;
    Traced("backward", "compute", [&] { tape_.Backward(loss, grad_scale); });
    if (!zero_units_) std::memcpy(slot, params.flat_grads(), n * sizeof(float));
  }
  SlowDown();
  c->compute_end_ns = NowNanos();
  LS_RETURN_IF_ERROR(SyncContributions(&c->sync));
  double total = 0;
  LS_RETURN_IF_ERROR(SumContributions(shard_losses_.data(), &total));
  c->loss_part = reports_loss() && mesh_.coord.dp == 0 ? total : 0.0;
  return Status::Ok();
}

// pp > 1: the stage runs its schedule over the micro-batches, then the dp group sums the
// gradients. Deterministic mode makes every micro-batch one canonical shard with its own
// contribution slot, exactly as without the pipeline.
Status Trainer::PipelineStep(StepCompute* c) {
  const TrainSection& t = setup_.run.train;
  const bool det = setup_.options.deterministic;
  const int micros = setup_.layout.pp_micros;
  const int64_t rows = MicroRows(), n = local_numel();
  const float scale = static_cast<float>(static_cast<double>(rows) / static_cast<double>(t.batch_size));
  // DiLoCo: the gradient is the mean over the replica's own rows (as DeterministicStep's).
  const float grad_scale =
      replicas_differ() ? static_cast<float>(static_cast<double>(rows) * dims().dp / static_cast<double>(t.batch_size))
                        : scale;
  nn::ParameterStore& params = model_->params();
  PipelineRunner::Hooks hooks;
  if (det) {
    hooks.before_backward = [&](int i) {
      params.ZeroGrad();
      if (zero_units_) zero_units_->SetContribution(contributions_.data() + i * n);
    };
    if (!zero_units_)
      hooks.after_backward = [&](int i) {
        std::memcpy(contributions_.data() + i * n, params.flat_grads(), n * sizeof(float));
      };
  } else {
    params.ZeroGrad();
    if (zero_units_) zero_units_->BeginStep();
  }
  std::vector<float> losses;
  LS_RETURN_IF_ERROR(pipeline_->Step(
      micros, [&](int i) { return data_->TrainRows(i * rows, rows); }, grad_scale, hooks, &losses, &c->pipe));
  LS_RETURN_IF_ERROR(tp_->status());
  c->compute_end_ns = NowNanos();
  if (det) {
    LS_RETURN_IF_ERROR(SumTiedGradients(micros));
    LS_RETURN_IF_ERROR(SyncContributions(&c->sync));
    if (model_->last_stage()) {
      for (int i = 0; i < micros; ++i) shard_losses_[i] = losses[i] * scale;
      double total = 0;
      LS_RETURN_IF_ERROR(SumContributions(shard_losses_.data(), &total));
      c->loss_part = reports_loss() && mesh_.coord.dp == 0 ? total : 0.0;
    }
    return Status::Ok();
  }
  if (zero_units_) {
    Stopwatch sync;
    LS_RETURN_IF_ERROR(Traced("wait for gradients", "wait", [&] { return zero_units_->FinishStep(); }));
    c->sync.comm_ms = c->sync.exposed_ms = sync.ElapsedMs();
  } else if (dims().dp > 1 && !replicas_differ()) {  // (DiLoCo: nothing is reduced)
    Stopwatch sync;
    LS_RETURN_IF_ERROR(Traced("gradient allreduce", "comm", [&] { return AllreduceGrads(params.flat_grads(), n); }));
    c->sync.comm_ms = c->sync.exposed_ms = sync.ElapsedMs();
    c->sync.buckets = 1;
  }
  LS_RETURN_IF_ERROR(SumTiedGradients(0));
  if (reports_loss())
    for (float l : losses) c->loss_part += static_cast<double>(l) * scale;
  return Status::Ok();
}

// Sums the gradients over the dp group in place, in fp32 or (train.grad_dtype = bf16) as bf16.
Status Trainer::AllreduceGrads(float* grads, int64_t n) {
  if (!bf16_grads())
    return mesh_.dp->Allreduce(grads, grads, static_cast<size_t>(n), comm::DType::kF32, comm::ReduceOp::kSum)->Wait();
  std::vector<uint16_t> wire(static_cast<size_t>(n));
  tensor::RoundToBf16(grads, n, wire.data(), n, 1, n);
  LS_RETURN_IF_ERROR(
      mesh_.dp->Allreduce(wire.data(), wire.data(), wire.size(), comm::DType::kBF16, comm::ReduceOp::kSum)->Wait());
  Bf16ToF32(wire.data(), grads, wire.size());
  return Status::Ok();
}

// The local tensor tied across the pipeline: the embedding on the first stage, its copy on
// the last (gpt_shard.h, llama_shard.h), or -1 (pp = 1, untied, a middle stage).
int Trainer::TiedParam() const { return dims().pp == 1 ? -1 : model_->TiedParam(); }

// Tied embeddings over a pipeline: the first stage's wte gradient (the embedding's part) and
// the last stage's copy's (the head's part) become their sum on both, so both tensors take the
// same update and stay equal. `slots` > 0 (deterministic mode): done on each canonical shard's
// contribution before the fixed-tree sum, the very additions a single stage makes
// (nn/tied_weight.h). 0: on the reduced gradient (the flat buffer, or under ZeRO-2/3 this
// rank's shard of it, completed from the dp owners first).
Status Trainer::SumTiedGradients(int slots) {
  const int tied = TiedParam();
  if (tied < 0) return Status::Ok();
  const nn::ParamInfo& p = model_->params().info(tied);
  comm::Communicator& pp = *mesh_.pp;
  const int partner = model_->first_stage() ? dims().pp - 1 : 0;
  std::vector<float> mine(static_cast<size_t>(p.numel)), theirs(mine.size());
  auto exchange = [&]() -> Status {
    LS_RETURN_IF_ERROR(pp.Send(mine.data(), mine.size(), comm::DType::kF32, partner, kTiedGradTag)->Wait());
    LS_RETURN_IF_ERROR(pp.Recv(theirs.data(), theirs.size(), comm::DType::kF32, partner, kTiedGradTag)->Wait());
    // One IEEE addition each, commutative: both stages get the same bits.
    for (size_t i = 0; i < mine.size(); ++i) mine[i] += theirs[i];
    return Status::Ok();
  };
  return Traced("tied gradient sum", "comm", [&]() -> Status {
    const int64_t n = local_numel();
    for (int s = 0; s < slots; ++s) {
      float* g = contributions_.data() + s * n + p.offset;
      std::copy(g, g + p.numel, mine.begin());
      LS_RETURN_IF_ERROR(exchange());
      std::copy(mine.begin(), mine.end(), g);
    }
    if (slots > 0) return Status::Ok();
    if (!zero_units_) {
      float* g = model_->params().flat_grads() + p.offset;
      std::copy(g, g + p.numel, mine.begin());
      LS_RETURN_IF_ERROR(exchange());
      std::copy(mine.begin(), mine.end(), g);
      return Status::Ok();
    }
    // ZeRO-2/3: each dp rank owns a piece of the reduced gradient; every piece is broadcast by
    // its owner so that the whole tensor is summed, then each keeps its own piece.
    const int dp = dims().dp;
    for (int r = 0; r < dp; ++r) {
      const optim::FlatRange s = parallel::ShardRange(n, r, dp);
      const int64_t lo = std::max(s.begin, p.offset), hi = std::min(s.end, p.offset + p.numel);
      if (lo >= hi) continue;
      if (r == mesh_.coord.dp)
        std::copy(zero_units_->grad_shard() + (lo - owned_.begin), zero_units_->grad_shard() + (hi - owned_.begin),
                  mine.begin() + (lo - p.offset));
      if (dp > 1)
        LS_RETURN_IF_ERROR(
            mesh_.dp->Broadcast(mine.data() + (lo - p.offset), static_cast<size_t>(hi - lo), comm::DType::kF32, r)
                ->Wait());
    }
    LS_RETURN_IF_ERROR(exchange());
    const int64_t lo = std::max(owned_.begin, p.offset), hi = std::min(owned_.end, p.offset + p.numel);
    if (lo < hi)
      std::copy(mine.begin() + (lo - p.offset), mine.begin() + (hi - p.offset),
                zero_units_->grad_shard() + (lo - owned_.begin));
    return Status::Ok();
  });
}

// This rank's part of the exact sum of squares of every unique gradient element in the world.
// The parts travel in the step's record (GatherStep) and merge by integer addition, so every
// rank gets the same bits of the global norm (NaN or inf when any element is not finite)
// without a collective of its own.
optim::ExactSquareSum Trainer::GradSquares() {
  optim::ExactSquareSum sum;
  ForEachCountedGrad([&](int, const float* g, int64_t n) { sum.Add(g, n); });
  return sum;
}

// DiLoCo: the square sum of this replica's gradient, summed over its tensor- and
// pipeline-parallel ranks (each counts the elements it alone holds) by exact integer addition:
// the same bits on all of them. Without either, this rank's own.
Result<optim::ExactSquareSum> Trainer::ReplicaSquares(const optim::ExactSquareSum& mine) {
  if (!replicas_differ() || (dims().tp == 1 && dims().pp == 1)) return mine;
  std::array<int64_t, optim::ExactSquareSum::kWords> words{};
  mine.ToWords(words.data());
  for (comm::Communicator* group : {mesh_.tp.get(), mesh_.pp.get()})
    if (group->size() > 1)
      LS_RETURN_IF_ERROR(
          group->Allreduce(words.data(), words.data(), words.size(), comm::DType::kI64, comm::ReduceOp::kSum)->Wait());
  return optim::ExactSquareSum::FromWords(words.data());
}

Status Trainer::OuterStep(int64_t step) {
  const bool last = step + 1 == setup_.total_steps;
  LS_ASSIGN_OR_RETURN(const int synced, Traced("diloco outer step", "comm", [&] {
                        return diloco_->AfterStep(step, last, model_->params().flat_params());
                      }));
  // The parameters changed after the update wrote their bf16 copy.
  if (synced > 0 && setup_.run.train.precision == "bf16") RefreshBf16Weights();
  return Status::Ok();
}

Status Trainer::TrainStep(int64_t step) {
  Stopwatch step_clock;
  nn::ParameterStore& params = model_->params();
  comm_bytes_->store(0);
  step_ = step;

  Stopwatch data_clock;
  LS_RETURN_IF_ERROR(Traced("data", "data", [&] { return data_->NextTrain(); }));
  const double data_ms = data_clock.ElapsedMs();

  Stopwatch compute_clock;
  BeginSlowStep(step);
  StepCompute c;
  LS_RETURN_IF_ERROR((this->*compute_)(&c));
  LS_RETURN_IF_ERROR(tp_->status());
  if (zero_units_) LS_RETURN_IF_ERROR(zero_units_->status());
  if (NanDue(setup_.fault, rank_, step, /*in_loss=*/true)) c.loss_part = std::numeric_limits<double>::quiet_NaN();
  if (NanDue(setup_.fault, rank_, step, /*in_loss=*/false)) InjectNonFiniteGrad();
  // Compute time excludes the blocking wait at the end (exposed communication).
  const double compute_ms = compute_clock.ElapsedMs() - c.sync.exposed_ms;

  RankStepRecord record{c.loss_part, c.compute_end_ns, c.pipe.busy_ms, c.pipe.total_ms};
  // The straggler view: a pipeline stage's compute is its busy time, its idle time in the
  // schedule is waiting as much as a blocked collective is.
  record.compute_ms = pipeline_ ? c.pipe.busy_ms : compute_ms;
  record.wait_ms = c.sync.exposed_ms + (c.pipe.total_ms - c.pipe.busy_ms);
  record.peer_group = mesh_.coord.pp;
  if (setup_.run.data.loss_mask && mesh_.coord.tp == 0 && mesh_.coord.pp == 0)
    record.trained_targets = data_->TrainedTargets();
  const optim::ExactSquareSum squares = GradSquares();
  squares.ToWords(record.norm_words.data());
  LS_ASSIGN_OR_RETURN(GatheredStep gathered,
                      Traced("step stats", "comm", [&] { return GatherStep(*world_comm_, record); }));

  Stopwatch optim_clock;
  const int64_t optim_clock_start = NowNanos();
  double grad_norm = optim::NormOf(optim::ExactSquareSum::FromWords(gathered.norm_words.data()));
  // DiLoCo: each replica clips by its own gradient's norm; the row reports the root mean
  // square of the replicas' norms.
  LS_ASSIGN_OR_RETURN(const optim::ExactSquareSum replica_squares, ReplicaSquares(squares));
  const double clip_norm = replicas_differ() ? optim::NormOf(replica_squares) : grad_norm;
  if (replicas_differ()) grad_norm /= std::sqrt(static_cast<double>(dims().dp));
  if (!std::isfinite(grad_norm) || !std::isfinite(gathered.loss))
    return HandleNonFinite(step, gathered.loss, grad_norm);
  consecutive_skips_ = 0;
  // Clipping is applied as the optimizer reads each gradient (the same float product as a
  // clipping pass, without the extra pass over the gradient).
  const float clip = setup_.optim.grad_clip > 0 ? optim::ClipFactor(setup_.optim.grad_clip, clip_norm) : 1.0f;
  const float lr = schedule_->LrAt(step);
  checkpoints_->WaitForSnapshot();  // an async save may still be copying the parameters
  uint16_t* rounded = Bf16WeightsFromTheUpdate();
  optimizer_->Step(OwnedParams(), OwnedGrads(), lr, clip, rounded);
  if (gather_)
    LS_RETURN_IF_ERROR(Traced("param all-gather", "comm", [&] { return gather_->Gather(params.flat_params()); }));
  if (diloco_) LS_RETURN_IF_ERROR(OuterStep(step));
  if (rounded == nullptr) RefreshBf16Weights();
  trace_.Add("optimizer", "compute", optim_clock_start, NowNanos());
  const double optim_ms = optim_clock.ElapsedMs();

  if (!reporter_) return Status::Ok();
  StepFigures f;
  f.step = step + 1;
  f.loss = gathered.loss;
  f.lr = lr;
  f.grad_norm = grad_norm;
  f.step_ms = step_clock.ElapsedMs();
  f.data_ms = data_ms;
  f.compute_ms = compute_ms;
  f.optim_ms = optim_ms;
  f.sync = c.sync;
  f.train_flops_per_sample = model_->TrainFlopsPerSample();
  f.comm_bytes = comm_bytes_->load();
  return reporter_->Step(f, gathered);
}

}  // namespace lockstep::runtime
