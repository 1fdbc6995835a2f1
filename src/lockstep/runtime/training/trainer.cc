#include "lockstep/runtime/training/trainer.h"

#include <unistd.h>
#include <cstdio>

#include <cstdlib>
#include <cstring>

#include "lockstep/comm/counting_communicator.h"
#include "lockstep/core/log.h"
#include "lockstep/core/machine.h"
#include "lockstep/core/version.h"
#include "lockstep/nn/model.h"
#include "lockstep/parallel/gpt_shard.h"
#include "lockstep/parallel/llama_shard.h"
#include "lockstep/runtime/recovery/fault_injection.h"
#include "lockstep/runtime/setup/worker_env.h"
#include "lockstep/runtime/training/eval_loop.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::runtime {

Trainer::Trainer(const RunSetup& setup, std::shared_ptr<comm::Communicator> world, tensor::MemoryTracker* memory)
    : setup_(setup),
      world_comm_(std::move(world)),
      rank_(world_comm_->rank()),
      world_(world_comm_->size()),
      config_(setup.config),
      trace_(world_comm_->rank(), !setup.options.trace_file.empty()),
      memory_(memory) {}

Trainer::~Trainer() {
  if (optimizer_reserved_ > 0) memory_->Release(optimizer_reserved_, tensor::MemoryTag::kOptimizer);
  if (contributions_reserved_ > 0) memory_->Release(contributions_reserved_, tensor::MemoryTag::kContribution);
}

namespace {

// Binary units, as --mem-limit's K/M/G suffixes are.
std::string Megabytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

}  // namespace

// --mem-limit: before anything is allocated, the model states this rank will hold under its
// layout (the ZeRO paper's accounting of its local parameters, plus the units ZeRO-2/3 hold in
// flight) must fit, or the run stops with one line saying what does not fit and what would.
Status Trainer::CheckMemoryLimit() {
  const int64_t limit = setup_.options.mem_limit;
  if (limit <= 0) return Status::Ok();
  int64_t numel = 0, largest_unit = 0;
  if (setup_.layout.sharded()) {
    // A dry shard: parameter shapes, no storage.
    LS_ASSIGN_OR_RETURN(std::unique_ptr<parallel::StageModel> dry, MakeStage(false, false));
    numel = dry->params().numel();
    for (const parallel::ParamUnit& u : dry->units()) {
      const nn::ParamInfo& last = dry->params().info(u.end_param - 1);
      largest_unit = std::max(largest_unit, last.offset + last.numel - dry->params().info(u.first_param).offset);
    }
  } else {
    LS_ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> probe, setup_.job.model(config_));
    if (probe == nullptr) return Status::InvalidArgument("the job's model function returned no model");
    numel = largest_unit = probe->params().numel();
  }
  const int64_t shard = (numel + dims().dp - 1) / dims().dp;
  const int64_t moments = setup_.optim.kind == optim::OptimizerKind::kAdamW ? 2 : 1;
  const int64_t params = 4 * (zero_ == 3 ? shard : numel), grads = 4 * (zero_ >= 2 ? shard : numel);
  const int64_t optimizer = 4 * moments * (zero_ >= 1 ? shard : numel);
  const int64_t in_flight = zero_ == 3 ? 3 * 4 * largest_unit : zero_ == 2 ? 4 * largest_unit : 0;
  int micro_in_flight = 1;
  int64_t rows = 0;
  const int64_t activations = setup_.layout.gpt ? ActivationEstimate(&micro_in_flight, &rows).total() : 0;
  // Deterministic mode keeps one gradient per canonical shard of the rank (Setup()).
  const int64_t contributions =
      setup_.options.deterministic ? 4 * numel * (setup_.run.train.det_shards / dims().dp) : 0;
  const int64_t total = params + grads + optimizer + in_flight + activations + contributions;
  if (total <= limit) return Status::Ok();
  return Status::InvalidArgument(
      "--mem-limit " + Megabytes(limit) + ": worker " + std::to_string(rank_) + " needs " + Megabytes(total) +
      " (parameters " + Megabytes(params) + ", gradients " + Megabytes(grads) + ", optimizer " + Megabytes(optimizer) +
      (in_flight ? ", layers in flight " + Megabytes(in_flight) : std::string()) +
      (activations ? ", activations " + Megabytes(activations) : std::string()) +
      (contributions ? ", deterministic gradient contributions " + Megabytes(contributions) : std::string()) +
      " with --zero " + std::to_string(zero_) + " over dp=" + std::to_string(dims().dp) +
      "); shard them with a higher --zero over more workers, recompute activations "
      "(train.recompute = \"block\"), or raise the limit");
}

// The rank's part of the model: its pipeline stage of the GPT split over its tp group, or the
// job's whole model (any other model; ResolveLayout refused tp/pp for it).
Status Trainer::BuildModel() {
  const RunLayout& lp = setup_.layout;
  // ZeRO-2 keeps no full gradient buffer, ZeRO-3 no full parameter buffer either.
  const bool flat_params = zero_ < 3, flat_grads = zero_ < 2;
  if (!lp.sharded()) {
    LS_ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> whole, setup_.job.model(config_));
    if (whole == nullptr) return Status::InvalidArgument("the job's model function returned no model");
    model_ = std::make_unique<parallel::WholeModel>(std::move(whole));
    std::vector<float> initial;
    if (!flat_params) initial.assign(model_->params().flat_params(), model_->params().flat_params() + local_numel());
    model_->params().DetachStorage(!flat_params, !flat_grads);
    if (zero_ >= 2) {
      LS_ASSIGN_OR_RETURN(zero_units_, parallel::ZeroUnits::Create(zero_, mesh_.dp, model_.get(), 0,
                                                                   initial.empty() ? nullptr : initial.data()));
    }
    return Status::Ok();
  }
  LS_ASSIGN_OR_RETURN(model_, MakeStage(flat_params, flat_grads));
  if (zero_ >= 2) {
    const uint64_t seed = lp.gpt ? lp.gpt->init_seed : lp.llama->init_seed;
    LS_ASSIGN_OR_RETURN(zero_units_, parallel::ZeroUnits::Create(zero_, mesh_.dp, model_.get(), seed));
  }
  return Status::Ok();
}

// This rank's stage of the GPT or the Llama, split over its tp group.
Result<std::unique_ptr<parallel::StageModel>> Trainer::MakeStage(bool flat_params, bool flat_grads) const {
  if (setup_.layout.gpt) {
    parallel::GptShardOptions o = StageOptions();
    o.flat_params = flat_params;
    o.flat_grads = flat_grads;
    LS_ASSIGN_OR_RETURN(std::unique_ptr<parallel::GptShard> shard, parallel::GptShard::Create(o, tp_.get()));
    return std::unique_ptr<parallel::StageModel>(std::move(shard));
  }
  const int s = mesh_.coord.pp;
  parallel::LlamaShardOptions o;
  o.model = *setup_.layout.llama;
  o.first_layer = setup_.layout.partition.begin[s];
  o.end_layer = setup_.layout.partition.begin[s + 1];
  o.has_embedding = s == 0;
  o.has_head = s == dims().pp - 1;
  o.flat_params = flat_params;
  o.flat_grads = flat_grads;
  o.recompute = setup_.run.train.recompute == "block";
  LS_ASSIGN_OR_RETURN(std::unique_ptr<parallel::LlamaShard> shard, parallel::LlamaShard::Create(o, tp_.get()));
  return std::unique_ptr<parallel::StageModel>(std::move(shard));
}

// This rank's pipeline stage of the GPT: its blocks of the partition, the embeddings on the
// first stage, the head on the last.
parallel::GptShardOptions Trainer::StageOptions() const {
  const int s = mesh_.coord.pp;
  parallel::GptShardOptions o;
  o.model = *setup_.layout.gpt;
  o.first_layer = setup_.layout.partition.begin[s];
  o.end_layer = setup_.layout.partition.begin[s + 1];
  o.has_embedding = s == 0;
  o.has_head = s == dims().pp - 1;
  o.recompute = setup_.run.train.recompute == "block";
  return o;
}

parallel::ActivationBytes Trainer::ActivationEstimate(int* in_flight, int64_t* rows) const {
  const TrainSection& t = setup_.run.train;
  const int64_t per_rank = t.batch_size / dims().dp;
  *in_flight = 1;
  if (dims().pp > 1) {
    const int micros = setup_.layout.pp_micros;
    *rows = per_rank / micros;
    *in_flight = parallel::MaxInFlight(setup_.layout.schedule, dims().pp, mesh_.coord.pp, micros);
  } else if (setup_.options.deterministic) {
    *rows = t.batch_size / t.det_shards;  // one canonical shard at a time
  } else {
    *rows = per_rank / t.accum_steps;
  }
  const int64_t context = setup_.layout.gpt->context;
  parallel::ActivationBytes one =
      parallel::EstimateGptActivations(StageOptions(), dims().tp, *rows, context, setup_.options.deterministic);
  for (int64_t* f : {&one.embedding, &one.residual, &one.layernorm, &one.attention, &one.mlp, &one.head})
    *f *= *in_flight;
  return one;  // the recomputed block is alive once, whatever the micro-batches in flight
}

float* Trainer::OwnedParams() {
  return zero_ == 3 ? zero_units_->param_shard() : model_->params().flat_params() + owned_.begin;
}

float* Trainer::OwnedGrads() {
  return zero_ >= 2 ? zero_units_->grad_shard() : model_->params().flat_grads() + owned_.begin;
}

Status Trainer::Setup() {
  tensor::SetComputeThreads(setup_.threads_per_worker);
  tensor::SetDeterministicCompute(setup_.options.deterministic);
  tensor::SetComputePrecision(setup_.run.train.precision == "bf16" ? tensor::Precision::kBF16
                                                                   : tensor::Precision::kF32);
  // The groups count the bytes they send (comm_bytes of each row); the world communicator, which
  // carries the step's statistics and the checkpoint agreement, does not.
  LS_ASSIGN_OR_RETURN(mesh_, parallel::BuildMesh(std::make_shared<comm::CountingCommunicator>(world_comm_, comm_bytes_),
                                                 dims()));
  tp_ = std::make_unique<parallel::TpContext>(mesh_.tp, setup_.layout.tp_slices, setup_.options.deterministic);
  LS_RETURN_IF_ERROR(CheckMemoryLimit());
  LS_RETURN_IF_ERROR(BuildModel());
  LS_ASSIGN_OR_RETURN(data_, RankData::Create(setup_.data, setup_.run, mesh_.coord.dp, dims().dp));
  const int64_t numel = local_numel();
  owned_ = zero_ > 0 ? parallel::ShardRange(numel, mesh_.coord.dp, dims().dp) : optim::FlatRange{0, numel};
  if (zero_ == 1 || zero_ == 2) gather_ = std::make_unique<parallel::ShardedParamGather>(mesh_.dp, numel);
  LS_ASSIGN_OR_RETURN(OptimizerState opt, OptimizerState::Create(setup_.optim, model_->params(), owned_));
  optimizer_.emplace(std::move(opt));
  // The moments live in optim/'s plain vectors; they are counted (and limited) here.
  const int64_t state = optimizer_->StateBytes();
  if (!memory_->Reserve(state, tensor::MemoryTag::kOptimizer))
    return Status::InvalidArgument("--mem-limit " + Megabytes(setup_.options.mem_limit) + ": no room for " +
                                   Megabytes(state) + " of optimizer state on worker " + std::to_string(rank_));
  optimizer_reserved_ = state;
  LS_ASSIGN_OR_RETURN(optim::LrSchedule sched, optim::LrSchedule::Create(setup_.optim.schedule));
  schedule_.emplace(sched);
  ddp_ = std::make_unique<parallel::DataParallel>(mesh_.dp, &model_->params(), setup_.run.train.bucket_bytes);
  if (setup_.run.train.diloco()) LS_RETURN_IF_ERROR(CreateDiloco());
  if (setup_.run.train.powersgd()) LS_RETURN_IF_ERROR(CreatePowerSgd());
  ddp_->set_bf16_reduction(bf16_grads());
  if (dims().pp > 1) {
    pipeline_ = std::make_unique<PipelineRunner>(model_.get(), mesh_.pp, setup_.layout.schedule);
    compute_ = &Trainer::PipelineStep;  // deterministic or not: each micro-batch is a canonical shard
  } else {
    model_->set_eval_pool(&tape_.pool());  // validation reuses the step's buffers
    compute_ = setup_.options.deterministic ? &Trainer::DeterministicStep : &Trainer::SingleStageStep;
  }
  checkpoints_.emplace(setup_, world_comm_, mesh_.coord, sharded_state());
  LS_RETURN_IF_ERROR(checkpoints_->Connect());
  if (!setup_.resume_dir.empty()) {
    LS_RETURN_IF_ERROR(Resume());
  } else if (setup_.init_weights) {
    // --init-from: every local element from the canonical tensors, through the placements.
    const ParamSpan held = HeldParams();
    for (const parallel::LocalPiece& p :
         parallel::PiecesOf(*model_, held.data, held.begin, held.range, 0, /*reading=*/true)) {
      const std::vector<float>& t = setup_.init_weights->at(p.name);
      std::copy(t.begin() + p.global_begin, t.begin() + p.global_begin + p.count, const_cast<float*>(p.data));
    }
  }
  // (A resumed DiLoCo run keeps each replica's own parameters.)
  if (zero_ < 3 && !(diloco_ && !setup_.resume_dir.empty())) LS_RETURN_IF_ERROR(ddp_->BroadcastParameters());
  if (diloco_ && setup_.resume_dir.empty()) diloco_->Reset(model_->params().flat_params());
  // Exchanges that were in flight when the checkpoint was taken start again from its deltas.
  if (diloco_ && !setup_.resume_dir.empty()) LS_RETURN_IF_ERROR(diloco_->Relaunch(start_step_));
  RefreshBf16Weights();  // the values are final now (initialised, resumed, broadcast)
  if (trace_.enabled()) {
    ddp_->set_trace(&trace_);
    if (pipeline_) pipeline_->set_trace(&trace_);
    origin_ns_ = NowNanos();
    if (world_ > 1) LS_RETURN_IF_ERROR(world_comm_->Broadcast(&origin_ns_, 1, comm::DType::kI64, 0)->Wait());
  }
  if (setup_.options.deterministic) {
    const int64_t per_rank = setup_.run.train.det_shards / dims().dp;
    // One gradient per canonical shard this rank computes: as large as the model's gradients
    // times the shards, so counted (and limited) under a name of its own.
    const int64_t bytes = per_rank * numel * static_cast<int64_t>(sizeof(float));
    if (!memory_->Reserve(bytes, tensor::MemoryTag::kContribution))
      return Status::InvalidArgument("--mem-limit " + Megabytes(setup_.options.mem_limit) + ": no room for " +
                                     Megabytes(bytes) + " of deterministic gradient contributions (" +
                                     std::to_string(per_rank) + " shards) on worker " + std::to_string(rank_));
    contributions_reserved_ = bytes;
    contributions_.assign(static_cast<size_t>(per_rank * numel), 0.0f);
    shard_losses_.assign(static_cast<size_t>(per_rank), 0.0f);
  }
  LS_ASSIGN_OR_RETURN(std::vector<std::string> hosts, GatherHosts());
  nlohmann::json memory = MemoryRow();
  LS_LOG(INFO) << "memory: parameters " << memory["params_bytes"] << " B, gradients " << memory["grads_bytes"]
               << " B, optimizer state " << memory["optimizer_bytes"] << " B (zero=" << zero_ << ")";
  if (lead()) {
    // A resumed run keeps the rows up to its checkpoint and drops what the lost steps wrote.
    const bool keep_rows = start_step_ > 0 || std::getenv(kRestartEnv) != nullptr;
    const RowUnits units{data_->units_per_row(), data_->is_text(), data_->is_classifier()};
    LS_ASSIGN_OR_RETURN(reporter_, StepReporter::Open(setup_, start_step_, keep_rows, units, std::move(hosts)));
    for (const std::string& line : setup_.config_warnings) LS_LOG(WARN) << line;
    LogStart();
    LS_RETURN_IF_ERROR(reporter_->Started(StartRow(), pipeline_ ? pipeline_->schedule() : setup_.layout.schedule));
  }
  return Status::Ok();
}

// train.sync = "diloco": the outer optimizer over the dp group, its anchor and momentum
// counted as optimizer state.
Status Trainer::CreateDiloco() {
  const TrainSection& t = setup_.run.train;
  parallel::DilocoOptions o;
  o.inner_steps = t.diloco_inner_steps;
  o.outer_lr = t.diloco_outer_lr;
  o.outer_momentum = t.diloco_outer_momentum;
  o.fragments = static_cast<int>(t.diloco_fragments);
  o.bf16 = t.diloco_outer_dtype == "bf16";
  o.deterministic = setup_.options.deterministic;
  o.overlap_steps = t.diloco_overlap_steps;
  o.merge_alpha = t.diloco_merge_alpha;
  LS_ASSIGN_OR_RETURN(diloco_, parallel::DilocoSync::Create(mesh_.dp, model_->params(), o));
  // Anchor and momentum, and (overlapping) the deltas in flight and their sums.
  const int64_t buffers = o.overlap_steps > 0 ? 4 : 2;
  return ReserveOptimizerBytes(buffers * local_numel() * static_cast<int64_t>(sizeof(float)), "DiLoCo outer state");
}

// train.grad_compression = "powersgd": one slot per rank, or per canonical shard it computes
// (deterministic mode), each with its error feedback; counted as optimizer state.
Status Trainer::CreatePowerSgd() {
  const TrainSection& t = setup_.run.train;
  const bool det = setup_.options.deterministic;
  const int slots = det ? static_cast<int>(t.det_shards / dims().dp) : 1;
  parallel::PowerSgdOptions o;
  o.rank = static_cast<int>(t.powersgd_rank);
  o.seed = t.seed;
  o.deterministic = det;
  o.total_slots = det ? t.det_shards : dims().dp;
  LS_ASSIGN_OR_RETURN(powersgd_, parallel::PowerSgd::Create(mesh_.dp, model_->params(), slots, o));
  return ReserveOptimizerBytes((slots + 1) * local_numel() * static_cast<int64_t>(sizeof(float)),
                               "PowerSGD error feedback");
}

Status Trainer::ReserveOptimizerBytes(int64_t bytes, const char* what) {
  if (!memory_->Reserve(bytes, tensor::MemoryTag::kOptimizer))
    return Status::InvalidArgument("--mem-limit " + Megabytes(setup_.options.mem_limit) + ": no room for " +
                                   Megabytes(bytes) + " of " + what + " on worker " + std::to_string(rank_));
  optimizer_reserved_ += bytes;
  return Status::Ok();
}

// Every rank's host name, in rank order, for naming a straggler (rank 0 gets them; the others
// an empty list).
Result<std::vector<std::string>> Trainer::GatherHosts() {
  constexpr size_t kName = 64;
  char mine[kName] = {};
  if (::gethostname(mine, kName - 1) != 0) std::snprintf(mine, kName, "?");
  std::vector<char> all(kName * static_cast<size_t>(world_));
  if (world_ == 1)
    std::copy(mine, mine + kName, all.begin());
  else
    LS_RETURN_IF_ERROR(world_comm_->AllGather(mine, all.data(), kName, comm::DType::kU8)->Wait());
  std::vector<std::string> hosts;
  if (!lead()) return hosts;
  for (int r = 0; r < world_; ++r) {
    const char* name = all.data() + kName * static_cast<size_t>(r);
    hosts.emplace_back(name, strnlen(name, kName));
  }
  return hosts;
}

// ", bf16 products (oneDNN avx512_core_bf16)" in bf16 precision, "" in fp32.
std::string Trainer::Bf16Note() const {
  if (setup_.run.train.precision != "bf16") return "";
  const tensor::Bf16Support s = tensor::QueryBf16Support();
  return std::string(", bf16 products (") + (s.native ? "" : "emulated, ") + "oneDNN " + s.isa + ")" +
         (bf16_grads() ? ", bf16 gradient reduction" : "");
}

// The whole model's parameters (a shard holds only its part).
int64_t Trainer::ModelParamCount() const {
  if (setup_.layout.gpt) return nn::GptParamCount(*setup_.layout.gpt);
  if (setup_.layout.llama) return nn::LlamaParamCount(*setup_.layout.llama);
  return local_numel();
}

void Trainer::LogStart() {
  const int64_t params = ModelParamCount();
  std::string layout;
  if (dims().tp > 1 || dims().pp > 1 || zero_ > 0)
    layout = " (" + dims().ToString() + ",zero=" + std::to_string(zero_) + ")";
  LS_LOG(INFO) << "training " << model_->name() << " (" << params << " parameters) on " << world_ << " worker(s)"
               << layout << ", backend " << world_comm_->backend_name() << ", " << setup_.threads_per_worker
               << " compute thread(s) each, " << setup_.total_steps << " steps"
               << (setup_.options.deterministic ? ", deterministic" : "") << Bf16Note() << "; output in "
               << setup_.out_dir;
}

// What `lockstep report` puts in its header: the run's config, layout, backend and machine. A
// restarted run writes one per start (its step is where that start began).
nlohmann::json Trainer::StartRow() const {
  const int64_t params = ModelParamCount();
  return {{"event", "start"},
          {"step", start_step_},
          {"version", LOCKSTEP_VERSION},
          {"config", setup_.options.config_path},
          {"overrides", setup_.options.overrides},
          {"config_toml", config_.ToToml()},
          {"model", model_->name()},
          {"parameters", params},
          {"layout", dims().ToString()},
          {"zero", zero_},
          {"backend", world_comm_->backend_name()},
          {"world", world_},
          {"accum_steps", setup_.run.train.accum_steps},
          {"threads", setup_.threads_per_worker},
          {"deterministic", setup_.options.deterministic},
          {"mem_limit", setup_.options.mem_limit},
          {"total_steps", setup_.total_steps},
          {"unit", data_->is_text() ? "tokens" : "samples"},
          {"processor", ProcessorDescription()},
          {"host", HostName()}};
}

int64_t Trainer::MicroRows() const {
  const TrainSection& t = setup_.run.train;
  if (pipeline_) return data_->train_rows() / setup_.layout.pp_micros;
  // Deterministic mode computes one canonical shard at a time, whatever accum_steps says.
  if (setup_.options.deterministic) return t.batch_size / t.det_shards;
  return data_->train_rows() / t.accum_steps;
}

// Validation sums of this rank's replica: the rows of its dp shard, through the pipeline when
// there is one; only the replica's reporting rank (last stage, tp rank 0) returns non-zero sums.
Result<EvalSums> Trainer::EvaluateLocal() {
  const int64_t step_rows = MicroRows();
  bool released = false;
  return runtime::EvaluateLocal(*data_, [&](const nn::ModelInput& rows) -> Result<nn::EvalResult> {
    // Validation draws from the step's pool (set_eval_pool; with a pipeline, the first slot's):
    // batches of the step's micro-batch rows reuse its buffers. Any other size would be new
    // buffers on top of the pooled ones, so the pools first let go of their free buffers (the
    // next step maps them again) and the peak stays the larger of step and evaluation.
    if (!released && rows.batch != step_rows) {
      if (pipeline_)
        pipeline_->ReleaseBuffers();
      else
        tape_.pool().Release();
      released = true;
    }
    nn::EvalResult r;
    if (pipeline_) {
      LS_ASSIGN_OR_RETURN(r, pipeline_->Evaluate(rows));
    } else {
      r = model_->Evaluate(rows, nullptr, nullptr);
    }
    LS_RETURN_IF_ERROR(tp_->status());
    return reports_loss() ? r : nn::EvalResult{};
  });
}

Status Trainer::Validate(int64_t step) {
  LS_ASSIGN_OR_RETURN(EvalSums mine, Traced("validation", "eval", [&] { return EvaluateLocal(); }));
  LS_ASSIGN_OR_RETURN(EvalSums all, GatherEval(*world_comm_, mine));
  if (all.count == 0) return Status::InvalidArgument("the validation set is empty");
  last_val_loss_ = all.loss_sum / static_cast<double>(all.count);
  if (data_->is_classifier()) last_val_acc_ = static_cast<double>(all.correct) / static_cast<double>(all.count);
  return reporter_ ? reporter_->Validation(step, last_val_loss_, last_val_acc_, all.count) : Status::Ok();
}

// Every rank's events travel to rank 0 (size, then bytes), which writes one file.
Status Trainer::WriteTrace() {
  std::string mine = trace_.Serialize(origin_ns_);
  std::vector<std::string> all(world_);
  if (lead()) all[0] = std::move(mine);
  for (int r = 1; r < world_; ++r) {
    int64_t size = static_cast<int64_t>(mine.size());
    if (rank_ == r) {
      LS_RETURN_IF_ERROR(world_comm_->Send(&size, 1, comm::DType::kI64, 0, 7)->Wait());
      LS_RETURN_IF_ERROR(world_comm_->Send(mine.data(), mine.size(), comm::DType::kU8, 0, 8)->Wait());
    } else if (lead()) {
      LS_RETURN_IF_ERROR(world_comm_->Recv(&size, 1, comm::DType::kI64, r, 7)->Wait());
      all[r].resize(static_cast<size_t>(size));
      LS_RETURN_IF_ERROR(world_comm_->Recv(all[r].data(), all[r].size(), comm::DType::kU8, r, 8)->Wait());
    }
  }
  if (!lead()) return Status::Ok();
  LS_RETURN_IF_ERROR(trace::WriteChromeTrace(setup_.options.trace_file, all));
  reporter_->Print("trace written to " + setup_.options.trace_file);
  return Status::Ok();
}

bool Trainer::KeepsBf16Weights() {
  if (tensor::ComputePrecision() != tensor::Precision::kBF16 || !tensor::UseNativeBf16() ||
      !model_->params().has_flat_params())
    return false;
  // Deterministic GPT runs copy each canonical tensor-parallel slice of a weight before its
  // product (parallel/tp_linear.cc), so they round per product and a copy would go unread.
  return !(setup_.options.deterministic && setup_.layout.sharded());
}

void Trainer::RefreshBf16Weights() {
  if (!KeepsBf16Weights()) return;
  nn::ParameterStore& ps = model_->params();
  Traced("bf16 weight copy", "compute", [&] { bf16_weights_.Refresh(ps.flat_params(), ps.numel()); });
}

uint16_t* Trainer::Bf16WeightsFromTheUpdate() {
  // Only when this rank updates every parameter itself (ZeRO 0: owned_ is the whole buffer):
  // with ZeRO the other shards arrive by all-gather after the update, and the whole copy is
  // refreshed then.
  if (zero_ != 0 || !KeepsBf16Weights()) return nullptr;
  nn::ParameterStore& ps = model_->params();
  return bf16_weights_.RefreshInPlace(ps.flat_params(), ps.numel());
}

Status Trainer::Run() {
  // Every product of this rank thread reads the bf16 copy of the weights when there is one.
  tensor::ScopedBf16Weights bf16_weights(&bf16_weights_);
  LS_RETURN_IF_ERROR(Setup());
  if (start_step_ == setup_.total_steps) LS_RETURN_IF_ERROR(Validate(start_step_));  // nothing left to train
  heartbeat_.Beat();
  for (int64_t step = start_step_; step < setup_.total_steps; ++step) {
    InjectAtStep(setup_.fault, rank_, step);
    if (Status s = TrainStep(step); !s.ok()) {
      // Every rank stops at the same non-finite step: let the save in flight (the last good
      // checkpoint) commit first, or the ranks' exits would abort its collective commit and
      // leave `latest` one checkpoint older.
      if (s.code() == StatusCode::kNonFinite) {
        if (Status saved = ReportSaves(/*wait=*/true); !saved.ok()) {
          LS_LOG(WARN) << saved.ToString();
        }
      }
      return s;
    }
    if (step == start_step_) LS_RETURN_IF_ERROR(WriteMemoryRows(step + 1));  // the first step's peaks
    heartbeat_.Beat();
    bool last = step + 1 == setup_.total_steps;
    if (last || (setup_.eval_every > 0 && (step + 1) % setup_.eval_every == 0)) LS_RETURN_IF_ERROR(Validate(step + 1));
    const int64_t every = setup_.run.checkpoint.every;
    if (last || (every > 0 && (step + 1) % every == 0)) LS_RETURN_IF_ERROR(Save(step + 1));
    LS_RETURN_IF_ERROR(ReportSaves(/*wait=*/false));
    heartbeat_.Beat();
  }
  return Finish();
}

}  // namespace lockstep::runtime
