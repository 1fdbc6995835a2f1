// Elastic world sizes: the largest world a run can continue with after losing workers.
// A checkpoint of any layout loads into any other (docs/checkpoint-format.md) and, with
// --deterministic, every world size that the data split allows trains the same bits, so a
// smaller world only has to be one the run's setup accepts: the global batch (and its
// accumulation) splits over the data-parallel replicas, train.det_shards splits over them in
// deterministic mode, and the tensor and pipeline factors stay as given. dp shrinks; tp and
// pp never change (a model split for tp=4 needs four workers per replica), so a world that
// cannot hold one replica any more is refused with the reason.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/core/config.h"
#include "lockstep/core/result.h"
#include "lockstep/builtin_job.h"
#include "lockstep/job.h"
#include "lockstep/runtime/setup/run_config.h"
#include "lockstep/runtime/setup/run_layout.h"
#include "lockstep/train_options.h"

namespace lockstep::runtime {

struct ElasticWorld {
  int nproc = 1;
  std::string layout;  // --layout for that world ("" when the run gave none: all data-parallel)
};

class ElasticWorlds {
 public:
  // Reads the config (with --set and --steps/--epochs) once and sets up `job` (the program's
  // own, or lockstep train's built-in one); bad input is InvalidArgument.
  static Result<ElasticWorlds> Create(const TrainOptions& options, const Job& job = BuiltinJob());

  // The largest world in [min_nproc, capacity] the setup accepts. kUnavailable naming what
  // stands in the way when there is none.
  Result<ElasticWorld> Largest(int capacity, int min_nproc) const;

  // Why `nproc` workers cannot run this setup ("" when they can).
  std::string Refusal(int nproc) const;

  int64_t total_steps() const { return total_steps_; }
  // train.sync = "diloco": the dp groups are replicas with state of their own.
  bool diloco() const { return run_.train.diloco(); }

 private:
  TrainOptions options_;
  Config config_;
  RunConfig run_;
  ModelShape model_;  // the job's GPT or Llama shape (tp/pp possible), else neither
  int tp_ = 1, pp_ = 1;
  std::string layout_without_dp_;
  int64_t total_steps_ = 0;
};

}  // namespace lockstep::runtime
