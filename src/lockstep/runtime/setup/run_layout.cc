#include "lockstep/runtime/setup/run_layout.h"

#include "lockstep/data/distributed_sampler.h"
#include "lockstep/nn/model.h"
#include "lockstep/parallel/llama_shard.h"

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

// The Llama's: the largest power of two <= 8 dividing the query heads, the SwiGLU width and
// the vocabulary, whose key/value slices (min(slices, kv_heads)) nest with it.
int AutoSlices(const nn::LlamaConfig& c) {
  int s = 8;
  while (s > 1 && !parallel::CheckLlamaSplits(c, s, 1, "").ok()) s /= 2;
  return s;
}

}  // namespace

GptStageCosts EstimateLlamaStageCosts(const nn::LlamaConfig& c) {
  const double C = static_cast<double>(c.width), T = static_cast<double>(c.context);
  const double D = static_cast<double>(c.head_size()), H = static_cast<double>(c.heads);
  const double KV = static_cast<double>(c.kv_heads), F = static_cast<double>(c.ffn_hidden);
  const double V = static_cast<double>(c.padded_vocab());
  const double layer = 2.0 * (C * H * D + 2.0 * C * KV * D + H * D * C + 3.0 * C * F) + 2.0 * (T + 1.0) * H * D;
  return {layer, 0.0, 2.0 * C * V + 5.0 * V};
}

GptStageCosts EstimateGptStageCosts(const nn::GptConfig& c) {
  const nn::GptFlopsPerToken f = nn::GptForwardFlopsPerToken(c);
  return {f.block, f.embedding, f.head + f.softmax};
}

Result<RunLayout> ResolveLayout(const TrainOptions& options, const RunConfig& run, int world,
                                const ModelShape& model) {
  RunLayout lp;
  LS_ASSIGN_OR_RETURN(lp.dims, parallel::ParallelDims::Parse(options.layout, world, options.zero));
  const parallel::ParallelDims& d = lp.dims;
  lp.gpt = model.gpt;
  lp.llama = model.llama;
  if (!lp.sharded() && (d.tp > 1 || d.pp > 1)) {
    return Bad("--layout " + d.ToString() +
               ": tensor and pipeline parallelism need model.kind = \"gpt\" or \"llama\" (\"" + model.name +
               "\" trains data-parallel, with any --zero, only)");
  }
  const TrainSection& t = run.train;
  lp.tp_slices = d.tp;
  if (lp.sharded()) {
    const std::string by_tp = "the tensor-parallel degree tp = " + std::to_string(d.tp);
    if (options.deterministic) {
      lp.tp_slices = t.det_tp_slices > 0    ? static_cast<int>(t.det_tp_slices)
                     : lp.gpt.has_value() ? AutoSlices(*lp.gpt)
                                          : AutoSlices(*lp.llama);
      if (lp.tp_slices % d.tp != 0)
        return Bad("--deterministic with tp=" + std::to_string(d.tp) + " needs train.det_tp_slices divisible by " +
                   std::to_string(d.tp) + ", got " + std::to_string(lp.tp_slices));
    }
    const std::string by = options.deterministic ? "train.det_tp_slices = " + std::to_string(lp.tp_slices) : by_tp;
    if (lp.gpt) {
      LS_RETURN_IF_ERROR(CheckGptSplits(*lp.gpt, lp.tp_slices, by));
    } else {
      LS_RETURN_IF_ERROR(parallel::CheckLlamaSplits(*lp.llama, lp.tp_slices, d.tp, by));
    }
    const GptStageCosts k = lp.gpt ? EstimateGptStageCosts(*lp.gpt) : EstimateLlamaStageCosts(*lp.llama);
    const int64_t layers = lp.gpt ? lp.gpt->layers : lp.llama->layers;
    std::vector<double> blocks(static_cast<size_t>(layers), k.block);
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
