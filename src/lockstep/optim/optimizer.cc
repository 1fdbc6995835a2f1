#include "lockstep/optim/optimizer.h"

#include "lockstep/optim/adamw.h"
#include "lockstep/optim/optim_config.h"
#include "lockstep/optim/sgd.h"

namespace lockstep::optim {

Result<std::unique_ptr<Optimizer>> MakeOptimizer(const OptimConfig& config, const std::vector<ParamGroupSpan>& groups,
                                                 FlatRange owned) {
  if (config.kind == OptimizerKind::kAdamW) {
    LS_ASSIGN_OR_RETURN(AdamW a, AdamW::Create(config.adamw, groups, owned));
    return std::unique_ptr<Optimizer>(new AdamW(std::move(a)));
  }
  LS_ASSIGN_OR_RETURN(Sgd s, Sgd::Create(config.sgd, groups, owned));
  return std::unique_ptr<Optimizer>(new Sgd(std::move(s)));
}

}  // namespace lockstep::optim
