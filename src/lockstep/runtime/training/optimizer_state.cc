#include "lockstep/runtime/training/optimizer_state.h"

namespace lockstep::runtime {

Result<OptimizerState> OptimizerState::Create(const optim::OptimConfig& cfg, const nn::ParameterStore& params,
                                              optim::FlatRange owned) {
  std::vector<optim::ParamGroupSpan> groups;
  for (const nn::ParamInfo& p : params) groups.push_back({p.offset, p.numel, p.decay});
  OptimizerState o;
  o.owned_ = owned;
  if (cfg.kind == optim::OptimizerKind::kAdamW) {
    LS_ASSIGN_OR_RETURN(auto a, optim::AdamW::Create(cfg.adamw, groups, owned));
    o.adamw_.emplace(std::move(a));
  } else {
    LS_ASSIGN_OR_RETURN(auto s, optim::Sgd::Create(cfg.sgd, groups, owned));
    o.sgd_.emplace(std::move(s));
  }
  return o;
}

void OptimizerState::Step(float* params, const float* grads, float lr, float grad_scale, uint16_t* rounded) {
  if (adamw_)
    adamw_->Step(params, grads, lr, grad_scale, rounded);
  else
    sgd_->Step(params, grads, lr, grad_scale, rounded);
}

void OptimizerState::set_step(int64_t step) {
  if (adamw_)
    adamw_->set_step(step);
  else
    sgd_->set_step(step);
}

std::vector<OptimizerStateBuffer> OptimizerState::StateBuffers() {
  if (adamw_)
    return {{"exp_avg", adamw_->mutable_m(), owned_.begin}, {"exp_avg_sq", adamw_->mutable_v(), owned_.begin}};
  if (sgd_->mutable_momentum_buffer().empty()) return {};
  return {{"momentum", sgd_->mutable_momentum_buffer(), owned_.begin}};
}

int64_t OptimizerState::StateBytes() {
  int64_t bytes = 0;
  for (const OptimizerStateBuffer& b : StateBuffers()) bytes += static_cast<int64_t>(b.values.size() * sizeof(float));
  return bytes;
}

}  // namespace lockstep::runtime
