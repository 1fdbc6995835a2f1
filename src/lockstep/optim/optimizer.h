// Optimizer: what the trainer needs of any optimizer stepping a range of a model's flat
// parameter buffer (AdamW, SGD; optim_config.h chooses which from optim.kind). One
// implementation per algorithm; the trainer never switches on the kind.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/optim/flat_update.h"
#include "lockstep/optim/param_groups.h"

namespace lockstep::optim {

// One state tensor over the owned range, under the name PyTorch's state_dict uses
// ("exp_avg", "exp_avg_sq", "momentum_buffer" is "momentum" here): element i belongs to flat
// element owned().begin + i.
struct NamedState {
  std::string kind;
  std::span<float> values;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // One full step over the owned range. params/grads hold exactly the owned elements
  // (params[0] is flat element owned().begin). grad_scale != 1: every gradient is read as
  // grads[i] * grad_scale (the clipping factor). rounded != nullptr (laid out like params):
  // the bf16 rounding of each updated parameter is written there too.
  virtual void Step(float* params, const float* grads, float lr, float grad_scale, uint16_t* rounded) = 0;
  void Step(float* params, const float* grads, float lr, float grad_scale = 1.0f) {
    Step(params, grads, lr, grad_scale, nullptr);
  }

  // Steps taken: PyTorch's state["step"]. set_step restores it from a checkpoint.
  virtual int64_t step() const = 0;
  virtual void set_step(int64_t step) = 0;
  virtual FlatRange owned() const = 0;

  // The state a checkpoint keeps (views a reader may fill in place); empty when stateless.
  virtual std::vector<NamedState> State() = 0;
};

struct OptimConfig;

// The optimizer of `config` over `owned`, for a flat buffer laid out as `groups` says.
Result<std::unique_ptr<Optimizer>> MakeOptimizer(const OptimConfig& config, const std::vector<ParamGroupSpan>& groups,
                                                 FlatRange owned);

}  // namespace lockstep::optim
