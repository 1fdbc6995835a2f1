#include "lockstep/runtime/setup/elastic_worlds.h"

#include "lockstep/parallel/mesh.h"
#include "lockstep/runtime/setup/run_layout.h"
#include "lockstep/runtime/setup/run_setup.h"

namespace lockstep::runtime {

Result<ElasticWorlds> ElasticWorlds::Create(const TrainOptions& options, const Job& job) {
  ElasticWorlds p;
  p.options_ = options;
  LS_ASSIGN_OR_RETURN(p.config_, LoadTrainConfig(options));
  if (options.steps >= 0) {  // as SetUpRun: only the keys the layout reads matter here
    p.config_.SetInt("train.steps", options.steps);
    p.config_.SetInt("train.epochs", 0);
  } else if (options.epochs >= 0) {
    p.config_.SetInt("train.steps", 0);
    if (!p.config_.Override("train.epochs=" + std::to_string(options.epochs)).ok())
      return Status::InvalidArgument("--epochs: bad value");
  }
  LS_ASSIGN_OR_RETURN(p.run_, ReadRunConfig(p.config_, /*builtin_data=*/false));
  // The whole setup once (no directory is written with print_config): bad input stops here,
  // and the run's length is known (train.epochs needs the dataset).
  TrainOptions probe = options;
  probe.print_config = true;
  LS_ASSIGN_OR_RETURN(RunSetup setup, SetUpRun(job, probe, options.nproc));
  p.model_ = ModelShape{setup.layout.gpt, setup.layout.llama, "the model"};
  p.total_steps_ = setup.total_steps;
  LS_ASSIGN_OR_RETURN(parallel::ParallelDims d,
                      parallel::ParallelDims::Parse(options.layout, options.nproc, options.zero));
  p.tp_ = d.tp;
  p.pp_ = d.pp;
  // dp is what shrinks: the layout of a smaller world names tp and pp only and lets dp follow.
  if (!options.layout.empty()) p.layout_without_dp_ = "tp=" + std::to_string(d.tp) + ",pp=" + std::to_string(d.pp);
  return p;
}

std::string ElasticWorlds::Refusal(int nproc) const {
  // hier: a world is whole hosts (every host process runs the same number of workers).
  if (options_.backend == "hier" && options_.workers_per_host > 0 && nproc % options_.workers_per_host != 0)
    return "--backend hier runs whole hosts of " + std::to_string(options_.workers_per_host) + " workers";
  const int replica = tp_ * pp_;
  if (nproc < replica || nproc % replica != 0)
    return "--layout tp=" + std::to_string(tp_) + ",pp=" + std::to_string(pp_) + " needs a multiple of " +
           std::to_string(replica) + " workers (tp and pp are never shrunk, only dp)";
  TrainOptions o = options_;
  o.nproc = nproc;
  o.layout = layout_without_dp_;
  Result<RunLayout> layout = ResolveLayout(o, run_, nproc, model_);
  return layout.ok() ? "" : layout.status().message();
}

Result<ElasticWorld> ElasticWorlds::Largest(int capacity, int min_nproc) const {
  if (capacity < min_nproc)
    return Status::Unavailable(std::to_string(capacity) + " workers left, below --min-nproc " +
                               std::to_string(min_nproc));
  std::string why;
  for (int n = capacity; n >= min_nproc; --n) {
    const std::string refusal = Refusal(n);
    if (refusal.empty()) return ElasticWorld{n, layout_without_dp_};
    // One reason per distinct cause keeps the line short (3 and 1 often fail alike).
    if (why.find(refusal) == std::string::npos) why += (why.empty() ? "" : "; ") + std::to_string(n) + ": " + refusal;
  }
  return Status::Unavailable("no world of " + std::to_string(min_nproc) + ".." + std::to_string(capacity) +
                             " workers can run this plan (" + why + ")");
}

}  // namespace lockstep::runtime
