#include "lockstep/runtime/setup/run_layout.h"

#include "lockstep/data/distributed_sampler.h"
#include "lockstep/nn/model.h"

namespace lockstep::runtime {
namespace {

Status Bad(const std::string& message) { return Status::InvalidArgument(message); }

// Deterministic canonical slices: train.det_tp_slices, or the largest power of two <= 8 that
// divides the heads, the vocabulary and the MLP width (so every GPT splits somehow).
int AutoSlices(const nn::GptConfig& c) {
  int s = 8;
  while (s > 1 && (c.heads % s != 0 || c.padded_vocab() % s != 0 || (c.mlp_ratio * c.width) % s != 0)) s /= 2;
  return s;
}

Status CheckGptSplits(const nn::GptConfig& c, int slices, const std::string& by) {
  auto check = [&](const char* what, int64_t v) {
    return v % slices == 0 ? Status::Ok()
                           : Bad(std::string(what) + " = " + std::to_string(v) + " is not divisible by " + by);
  };
  LS_RETURN_IF_ERROR(check("model.heads", c.heads));
  LS_RETURN_IF_ERROR(
      check(c.vocab_pad > 1 ? "the padded vocabulary (model.vocab_pad)" : "model.vocab", c.padded_vocab()));
  return check("model.mlp_ratio * model.width", c.mlp_ratio * c.width);
}

}  // namespace

GptStageCosts EstimateGptStageCosts(const nn::GptConfig& c) {
  const nn::GptFlopsPerToken f = nn::GptForwardFlopsPerToken(c);
  return {f.block, f.embedding, f.head + f.softmax};
}

Result<RunLayout> ResolveLayout(const TrainOptions& options, const RunConfig& run, int world,
                                const std::optional<nn::GptConfig>& gpt, const std::string& model_name) {
  RunLayout lp;
  LS_ASSIGN_OR_RETURN(lp.dims, parallel::ParallelDims::Parse(options.layout, world, options.zero));
  const parallel::ParallelDims& d = lp.dims;
  lp.gpt = gpt;
  if (!gpt && (d.tp > 1 || d.pp > 1)) {
    return Bad("--layout " + d.ToString() +
               ": tensor and pipeline parallelism need model.kind = \"gpt\" (lockstep's GPT; \"" + model_name +
               "\" trains data-parallel, with any --zero, only)");
  }
  const TrainSection& t = run.train;
  lp.tp_slices = d.tp;
  if (lp.gpt) {
    if (options.deterministic) {
      lp.tp_slices = t.det_tp_slices > 0 ? static_cast<int>(t.det_tp_slices) : AutoSlices(*lp.gpt);
      if (lp.tp_slices % d.tp != 0)
        return Bad("--deterministic with tp=" + std::to_string(d.tp) + " needs train.det_tp_slices divisible by " +
                   std::to_string(d.tp) + ", got " + std::to_string(lp.tp_slices));
      LS_RETURN_IF_ERROR(
          CheckGptSplits(*lp.gpt, lp.tp_slices, "train.det_tp_slices = " + std::to_string(lp.tp_slices)));
    } else {
      LS_RETURN_IF_ERROR(CheckGptSplits(*lp.gpt, d.tp, "the tensor-parallel degree tp = " + std::to_string(d.tp)));
    }
    const GptStageCosts k = EstimateGptStageCosts(*lp.gpt);
    std::vector<double> blocks(static_cast<size_t>(lp.gpt->layers), k.block);
    Result<parallel::StagePartition> p = parallel::BalanceStages(blocks, k.embedding, k.head, d.pp);
    if (!p.ok()) return p.status();
    lp.partition = *p;
  }
  // The global batch splits over the dp replicas (tp and pp ranks of a replica share its rows).
  if (t.batch_size % d.dp != 0) return data::BatchNotDivisibleError("train.batch_size", t.batch_size, d.dp);
  const int64_t local = t.batch_size / d.dp;
  if (local % t.accum_steps != 0)
    return Bad("train.accum_steps " + std::to_string(t.accum_steps) + " does not divide the per-replica batch " +
               std::to_string(local));
  if (options.deterministic) {
    if (t.det_shards % d.dp != 0)
      return Bad("--deterministic needs a data-parallel degree dividing train.det_shards=" +
                 std::to_string(t.det_shards) + " (1, 2, 4, ...), got dp=" + std::to_string(d.dp));
    if (t.batch_size % t.det_shards != 0)
      return Bad("--deterministic needs train.batch_size divisible by train.det_shards=" +
                 std::to_string(t.det_shards));
  }
  LS_ASSIGN_OR_RETURN(lp.schedule, parallel::ParsePipeSchedule(t.pp_schedule));
  if (d.pp > 1) {
    if (t.accum_steps != 1)
      return Bad("train.accum_steps = " + std::to_string(t.accum_steps) +
                 ": with pipeline parallelism gradients accumulate over train.pp_microbatches instead");
    if (options.deterministic) {
      lp.pp_micros = static_cast<int>(t.det_shards / d.dp);  // each canonical shard is a micro-batch
    } else {
      lp.pp_micros = t.pp_microbatches > 0 ? static_cast<int>(t.pp_microbatches) : 2 * d.pp;
      if (local % lp.pp_micros != 0)
        return Bad("train.pp_microbatches = " + std::to_string(lp.pp_micros) +
                   " does not divide the per-replica batch " + std::to_string(local) + " (train.batch_size / dp)");
    }
    if (lp.pp_micros > 16000)
      return Bad("train.pp_microbatches = " + std::to_string(lp.pp_micros) + " is more than the 16000 a step can hold");
  }
  return lp;
}

}  // namespace lockstep::runtime
