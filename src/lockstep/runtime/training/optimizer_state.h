// The optimizer of one rank (optim::Optimizer: AdamW or SGD, as optim.kind says) over the part
// of its local flat parameter buffer it owns — all of it, or with ZeRO its data-parallel shard
// — with the state buffers exposed (as views laid out like the parameters of that range) for
// checkpoints, and their bytes for the memory accounting.
#pragma once

#include <memory>
#include <vector>

#include "lockstep/nn/parameter_store.h"
#include "lockstep/optim/optim_config.h"
#include "lockstep/optim/optimizer.h"
#include "lockstep/runtime/recovery/checkpointing.h"

namespace lockstep::runtime {

class OptimizerState {
 public:
  static Result<OptimizerState> Create(const optim::OptimConfig& cfg, const nn::ParameterStore& params,
                                       optim::FlatRange owned);

  // params/grads hold exactly the owned elements (params[0] is flat element owned().begin).
  // grad_scale: the clipping factor, applied as each gradient is read (optim::ClipFactor).
  // rounded (nullable, laid out like params): receives the updated parameters' bf16 rounding.
  void Step(float* params, const float* grads, float lr, float grad_scale = 1.0f, uint16_t* rounded = nullptr) {
    optimizer_->Step(params, grads, lr, grad_scale, rounded);
  }
  int64_t step() const { return optimizer_->step(); }
  void set_step(int64_t step) { optimizer_->set_step(step); }
  optim::FlatRange owned() const { return optimizer_->owned(); }

  // exp_avg/exp_avg_sq (AdamW) or momentum (SGD with momentum), each over owned().
  std::vector<OptimizerStateBuffer> StateBuffers();
  int64_t StateBytes();

 private:
  std::unique_ptr<optim::Optimizer> optimizer_;
};

}  // namespace lockstep::runtime
