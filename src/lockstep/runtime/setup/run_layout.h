// RunLayout: the parallel layout of a run (--layout, --zero, --deterministic and the train.*
// keys that shape it), checked once before any worker starts so that every impossible
// combination is one line and exit status 2 instead of a failure inside a rank:
// dp x tp x pp must be the world, the batch must split over the data-parallel replicas and
// their micro-batches, the GPT must split into the tensor-parallel slices, and the pipeline
// stages must each get a layer. It also fixes the pipeline partition (balanced by the
// estimated cost of each layer) that every rank then uses.
#pragma once

#include <optional>
#include <string>

#include "lockstep/core/config.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/nn/llama.h"
#include "lockstep/parallel/mesh.h"
#include "lockstep/parallel/pipeline_schedule.h"
#include "lockstep/runtime/setup/run_config.h"
#include "lockstep/train_options.h"

namespace lockstep::runtime {

struct RunLayout {
  parallel::ParallelDims dims;
  int tp_slices = 1;  // canonical slices of split layers: train.det_tp_slices (deterministic) or tp
  int pp_micros = 1;  // micro-batches per step through the pipeline (pp > 1)
  parallel::PipeSchedule schedule = parallel::PipeSchedule::k1F1B;
  parallel::StagePartition partition;    // pp stages over the blocks (always set for gpt and llama)
  std::optional<nn::GptConfig> gpt;      // model.kind = "gpt"
  std::optional<nn::LlamaConfig> llama;  // model.kind = "llama"
  // The model is split into stage shards (GptShard, LlamaShard) rather than trained whole.
  bool sharded() const { return gpt.has_value() || llama.has_value(); }
};

// The model a layout is resolved for: lockstep's GPT or Llama (only they can be split over
// tp and pp ranks), or another model, named in errors.
struct ModelShape {
  std::optional<nn::GptConfig> gpt;
  std::optional<nn::LlamaConfig> llama;
  std::string name;
};

Result<RunLayout> ResolveLayout(const TrainOptions& options, const RunConfig& run, int world,
                                const ModelShape& model);

// Estimated forward FLOPs per token of one GPT block, of the embeddings and of the head:
// the costs BalanceStages weighs.
struct GptStageCosts {
  double block = 0, embedding = 0, head = 0;
};
GptStageCosts EstimateGptStageCosts(const nn::GptConfig& c);
// The same for a Llama layer, its embedding lookup and its head.
GptStageCosts EstimateLlamaStageCosts(const nn::LlamaConfig& c);

}  // namespace lockstep::runtime
