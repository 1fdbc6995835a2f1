// The layouts `lockstep plan` weighs for N workers: every dp x tp x pp factorisation that
// ResolveLayout (the check `lockstep train` runs) accepts, with ZeRO 0-3 (1-3 only where there
// is data parallelism to shard over), gradient accumulation (pp = 1) or pipeline
// micro-batches (pp > 1) of 1x, 2x and 4x (x = 1 or pp) where the per-replica batch divides,
// and train.precision / train.recompute when the config registry knows those keys. Each
// carries the exact parameter layout of its stages (a dry parallel::GptShard per stage and
// tp rank 0: no storage), which the memory prediction counts from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/config.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/optim/optim_config.h"
#include "lockstep/runtime/setup/run_config.h"
#include "lockstep/runtime/setup/run_layout.h"

namespace lockstep::planner {

// The config of a plan, read and checked once.
struct PlanSetup {
  Config config;
  runtime::RunConfig run;
  optim::OptimConfig optim;
  std::optional<nn::GptConfig> gpt;  // model.kind = "gpt"
  int world = 1;
  int workers_per_host = 0;  // plan --hosts: L workers a host, every tp group inside one (0: one machine)
  bool knows_precision = false;  // the registry has train.precision / train.recompute
  bool knows_recompute = false;
  int64_t units_per_row() const { return gpt ? gpt->context : 1; }  // tokens, or 1 sample
};

struct StageLayout {
  bool has_embedding = false, has_head = false;
  int blocks = 0;
  std::vector<int64_t> param_numels;       // local parameters (tp rank 0), forward order
  std::vector<std::pair<int, int>> units;  // ZeRO units: parameter index ranges
  std::vector<std::vector<int64_t>> param_shapes;  // the parameters' shapes, in the same order
};

struct Candidate {
  parallel::ParallelDims dims;
  int zero = 0;
  int micros = 1;  // accumulation steps (pp = 1) or pipeline micro-batches (pp > 1)
  std::string precision = "fp32", recompute = "none";
  parallel::PipeSchedule schedule = parallel::PipeSchedule::k1F1B;
  int interleave = 1;      // virtual stages per pipeline rank (described machines only)
  int64_t micro_rows = 0;  // rows of one micro-batch on one replica
  std::vector<StageLayout> stages;
  std::string layout() const { return dims.ToString(); }  // "dp=2,tp=1,pp=1"
};

// Reads the config after --set (InvalidArgument naming the key for a bad or unknown one).
Result<PlanSetup> ReadPlanSetup(const std::string& config_path, const std::vector<std::string>& overrides, int world);

// Every valid layout of setup.world workers. InvalidArgument naming why when none is.
Result<std::vector<Candidate>> EnumerateCandidates(const PlanSetup& setup);

// The one-worker layouts of the same config (accumulation 1, 2, 4; fp32; no recompute).
Result<std::vector<Candidate>> OneWorkerCandidates(const PlanSetup& setup);

}  // namespace lockstep::planner
