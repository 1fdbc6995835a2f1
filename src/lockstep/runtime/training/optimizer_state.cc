#include "lockstep/runtime/training/optimizer_state.h"

namespace lockstep::runtime {

Result<OptimizerState> OptimizerState::Create(const optim::OptimConfig& cfg, const nn::ParameterStore& params,
                                              optim::FlatRange owned) {
  std::vector<optim::ParamGroupSpan> groups;
  for (const nn::ParamInfo& p : params) groups.push_back({p.offset, p.numel, p.decay});
  OptimizerState o;
  LS_ASSIGN_OR_RETURN(o.optimizer_, optim::MakeOptimizer(cfg, groups, owned));
  return o;
}

std::vector<OptimizerStateBuffer> OptimizerState::StateBuffers() {
  std::vector<OptimizerStateBuffer> buffers;
  for (const optim::NamedState& s : optimizer_->State()) buffers.push_back({s.kind, s.values, owned().begin});
  return buffers;
}

int64_t OptimizerState::StateBytes() {
  int64_t bytes = 0;
  for (const OptimizerStateBuffer& b : StateBuffers()) bytes += static_cast<int64_t>(b.values.size() * sizeof(float));
  return bytes;
}

}  // namespace lockstep::runtime
