// The Trainer's state outside the step (trainer.h): what goes into and comes out of its
// checkpoints (RankCheckpoints does the I/O), the memory rows, and the end of the run (the
// canonical weights' hash and a text sample).
#include <cstdio>
#include <cstring>

#include "lockstep/core/log.h"
#include "lockstep/core/machine.h"
#include "lockstep/interop/gpt_weights.h"
#include "lockstep/interop/llama_weights.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/runtime/training/trainer.h"
#include "lockstep/tensor/precision.h"

namespace lockstep::runtime {

nlohmann::json Trainer::Layout() const {
  return {{"world", world_}, {"dp", dims().dp}, {"tp", dims().tp}, {"pp", dims().pp}, {"zero", zero_}};
}

ParamSpan Trainer::HeldParams() {
  if (zero_ == 3) return {zero_units_->param_shard(), owned_.begin, owned_};
  return {model_->params().flat_params(), 0, {0, local_numel()}};
}

ParamSpan Trainer::WrittenParams() {
  ParamSpan v = HeldParams();
  if (zero_ != 3 && mesh_.coord.dp != 0) v.range = {0, 0};  // dp rank 0 writes the replicated values
  return v;
}

std::vector<OptimizerStateBuffer> Trainer::CheckpointBuffers(bool saving) {
  std::vector<OptimizerStateBuffer> buffers = optimizer_->StateBuffers();
  if (powersgd_) {
    // Replicated (dp rank 0 writes): the optimizer state and Q. Each rank's own: the error of
    // each of its slots, named by canonical shard (deterministic: any world size reloads it)
    // or by rank.
    const int replica = mesh_.coord.dp;
    if (saving && replica > 0) buffers.clear();
    if (!saving || replica == 0) buffers.push_back({"powersgd_q", std::span<float>(powersgd_->q()), 0});
    const int64_t slots = setup_.options.deterministic ? setup_.run.train.det_shards / dims().dp : 1;
    for (int64_t k = 0; k < slots; ++k) {
      const std::string name = setup_.options.deterministic
                                   ? "powersgd_error.shard" + std::to_string(replica * slots + k)
                                   : "powersgd_error.rank" + std::to_string(replica);
      buffers.push_back({name, std::span<float>(powersgd_->error(static_cast<int>(k))), 0});
    }
    return buffers;
  }
  if (!diloco_) return buffers;
  // Overlapping: the deltas in flight, each replica's own (named per replica below).
  if (diloco_->overlapping()) buffers.push_back({"diloco_pending", std::span<float>(diloco_->pending()), 0});
  const int replica = mesh_.coord.dp;
  if (replica > 0) {
    const std::string prefix = "replica" + std::to_string(replica) + ".";
    for (OptimizerStateBuffer& b : buffers) b.kind = prefix + b.kind;
    nn::ParameterStore& ps = model_->params();
    buffers.push_back({prefix + "param", std::span<float>(ps.flat_params(), static_cast<size_t>(ps.numel())), 0});
  }
  if (!saving || replica == 0) {  // the outer state is the same on every replica: one writer
    buffers.push_back({"diloco_anchor", std::span<float>(diloco_->anchor()), 0});
    buffers.push_back({"diloco_momentum", std::span<float>(diloco_->momentum()), 0});
  }
  return buffers;
}

Status Trainer::Resume() {
  ParamSpan held = HeldParams();
  if (replicas_differ() && mesh_.coord.dp > 0) held.range = {0, 0};  // its own, under "replica<R>.param"
  Result<CheckpointContents> loaded = checkpoints_->Load(*model_, held, CheckpointBuffers(/*saving=*/false));
  if (!loaded.ok() && diloco_ && loaded.status().message().find("has no tensor") != std::string::npos)
    return Status::InvalidArgument(
        loaded.status().message() +
        " (a DiLoCo run resumes from a DiLoCo checkpoint of at least as many replicas as its "
        "dp=" +
        std::to_string(dims().dp) + ")");
  LS_ASSIGN_OR_RETURN(CheckpointContents c, std::move(loaded));
  optimizer_->set_step(c.optimizer_step);
  LS_RETURN_IF_ERROR(data_->Restore(c.loader));
  start_step_ = c.step;
  return Status::Ok();
}

CheckpointContents Trainer::Contents(int64_t step) {
  CheckpointContents c;
  c.step = step;
  c.optimizer_step = optimizer_->step();
  c.loader = data_->State();
  c.config_hash = TrajectoryHash(setup_.config);
  c.rng = {{"kind", "philox4x32-10"}, {"seed", setup_.run.train.seed}};
  c.layout = Layout();
  if (setup_.layout.gpt) c.model = interop::GptConfigToJson(*setup_.layout.gpt);
  if (setup_.layout.llama) c.model = interop::LlamaConfigToJson(*setup_.layout.llama);
  c.tokenizer = setup_.run.data.tokenizer;
  return c;
}

Status Trainer::Save(int64_t step) {
  std::vector<SaveReport> finished;
  LS_RETURN_IF_ERROR(
      checkpoints_->Save(*model_, WrittenParams(), CheckpointBuffers(/*saving=*/true), Contents(step), &finished));
  if (reporter_)  // every rank of a sharded save reports; rank 0 logs
    for (const SaveReport& r : finished) LS_RETURN_IF_ERROR(reporter_->Checkpoint(r));
  return Status::Ok();
}

Status Trainer::ReportSaves(bool wait) {
  std::optional<Result<SaveReport>> r = checkpoints_->Finished(wait);
  if (!r) return Status::Ok();
  if (!r->ok()) return r->status();
  return reporter_ ? reporter_->Checkpoint(**r) : Status::Ok();
}

// This rank's bytes as its MemoryTracker counts them: parameters, gradients and optimizer
// state held now (flat buffers or ZeRO shards; units in flight are released by then), the
// peak of activation tensors and of everything together so far.
nlohmann::json Trainer::MemoryRow() {
  const int64_t mine[kMemoryFields] = {local_numel(),
                                       memory_->Current(tensor::MemoryTag::kParameter),
                                       memory_->Current(tensor::MemoryTag::kGradient),
                                       memory_->Current(tensor::MemoryTag::kOptimizer),
                                       memory_->Peak(tensor::MemoryTag::kActivation),
                                       memory_->PeakTotal()};
  nlohmann::json row = MemoryRowOf(rank_, mine);
  row["bf16_weights_bytes"] = memory_->Current(tensor::MemoryTag::kParameterCopy);
  row["workspace_bytes"] = memory_->Peak(tensor::MemoryTag::kWorkspace);
  row["contribution_bytes"] = memory_->Current(tensor::MemoryTag::kContribution);
  if (saved_activation_bytes_ >= 0) row["saved_activation_bytes"] = saved_activation_bytes_;
  // The process's resident set (all its rank threads): at the start of the workers and at its
  // peak so far, to hold the sums above against (docs/memory.md).
  row["rss_baseline_bytes"] = setup_.rss_baseline_bytes;
  row["rss_peak_bytes"] = PeakResidentBytes();
  if (setup_.layout.gpt) {
    int in_flight = 1;
    int64_t rows = 0;
    const parallel::ActivationBytes a = ActivationEstimate(&in_flight, &rows);
    row["activations_estimate"] = {{"embedding", a.embedding}, {"residual", a.residual}, {"layernorm", a.layernorm},
                                   {"attention", a.attention}, {"mlp", a.mlp},           {"head", a.head},
                                   {"recompute", a.recompute}, {"total", a.total()},     {"rows", rows},
                                   {"in_flight", in_flight}};
  }
  return row;
}

nlohmann::json Trainer::MemoryRowOf(int rank, const int64_t* f) const {
  return {{"event", "memory"},       {"rank", rank},
          {"zero", zero_},           {"parameters", f[0]},
          {"params_bytes", f[1]},    {"grads_bytes", f[2]},
          {"optimizer_bytes", f[3]}, {"peak_activation_bytes", f[4]},
          {"peak_bytes", f[5]},      {"mem_limit", setup_.options.mem_limit}};
}

// Every rank's memory row at `step` (rank 0 gets them all, in rank order), so the report can
// show the ranks side by side: under ZeRO, tp or pp they hold different amounts. Written after
// the first step of every start (a run killed later still shows its memory) and at the end.
Result<std::vector<nlohmann::json>> Trainer::GatherMemoryRows(int64_t step) {
  nlohmann::json row = MemoryRow();
  row["step"] = step;
  if (world_ == 1) return std::vector<nlohmann::json>{row};
  const int64_t mine[kMemoryFields] = {row["parameters"],      row["params_bytes"],          row["grads_bytes"],
                                       row["optimizer_bytes"], row["peak_activation_bytes"], row["peak_bytes"]};
  std::vector<int64_t> all(static_cast<size_t>(kMemoryFields * world_));
  LS_RETURN_IF_ERROR(world_comm_->AllGather(mine, all.data(), kMemoryFields, comm::DType::kI64)->Wait());
  std::vector<nlohmann::json> rows;
  for (int r = 0; r < world_; ++r) {
    // This rank's own row keeps its extra fields (bf16 copy, activation estimate).
    rows.push_back(r == rank_ ? row : MemoryRowOf(r, all.data() + kMemoryFields * r));
    rows.back()["step"] = step;
  }
  return rows;
}

Status Trainer::WriteMemoryRows(int64_t step) {
  LS_ASSIGN_OR_RETURN(std::vector<nlohmann::json> rows, GatherMemoryRows(step));
  if (reporter_)
    for (const nlohmann::json& row : rows) LS_RETURN_IF_ERROR(reporter_->Write(row));
  return Status::Ok();
}

// The parameter pieces this rank is the writer of (as for checkpoints).
std::vector<parallel::LocalPiece> Trainer::WeightPieces() {
  const ParamSpan params = WrittenParams();
  return parallel::PiecesOf(*model_, params.data, params.begin, params.range, mesh_.coord.tp);
}

Status Trainer::Finish() {
  LS_RETURN_IF_ERROR(ReportSaves(/*wait=*/true));  // `done` only once the last checkpoint is committed
  if (trace_.enabled()) LS_RETURN_IF_ERROR(WriteTrace());
  tape_.pool().Release();  // the activations' memory, for the gather and the sample below
  LS_ASSIGN_OR_RETURN(parallel::CanonicalTensors weights, parallel::GatherCanonical(*world_comm_, WeightPieces()));
  LS_ASSIGN_OR_RETURN(std::vector<nlohmann::json> memory, GatherMemoryRows(setup_.total_steps));
  if (!reporter_) return Status::Ok();
  LS_RETURN_IF_ERROR(reporter_->Done(memory, parallel::CanonicalXxh64(weights), last_val_loss_, last_val_acc_));
  if (setup_.layout.gpt && setup_.layout.gpt->vocab == 256) {  // byte-level: the sample is text
    // (other vocabularies: `lockstep sample --prompt-tokens`, which prints token ids)
    // The sample comes from a whole nn::Gpt holding the gathered canonical weights. It is a
    // by-product of the finished run, outside this worker's training budget (--mem-limit):
    // counted in the process-wide tracker, not the rank's.
    tensor::ScopedTracker outside_budget(nullptr);
    nn::Gpt gpt(*setup_.layout.gpt, nn::Gpt::InferenceOnly{});
    for (const nn::ParamInfo& p : gpt.params()) {
      const std::vector<float>& v = weights.at(p.name);
      std::memcpy(gpt.params().flat_params() + p.offset, v.data(), v.size() * sizeof(float));
    }
    tensor::ScopedPrecision fp32(tensor::Precision::kF32);  // the sample reads the fp32 master weights
    std::string sample = gpt.Generate("The ", 240, 0.8f, setup_.run.train.seed);
    std::printf("sample:\n%s\n", sample.c_str());
  }
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace lockstep::runtime
