// SGD with momentum, PyTorch semantics (torch.optim.SGD, maximize=False), on a range of the
// model's flat parameter buffer. Per element at step t (t starts at 1):
//   g = g + wd*p                                     L2 term, only where decay=true
//   buf = g                                          at t == 1 (PyTorch clones the gradient)
//   buf = momentum*buf + (1-dampening)*g             at t > 1
//   g = nesterov ? g + momentum*buf : buf            when momentum != 0
//   p = p + (-lr)*g
// Like AdamW, state (the momentum buffer) exists only for the owned range, and an element's
// update never depends on where a range was cut. With momentum 0 there is no state at all.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/optim/flat_update.h"
#include "lockstep/optim/optimizer.h"
#include "lockstep/optim/param_groups.h"

namespace lockstep::optim {

struct SgdOptions {
  // Defaults of torch.optim.SGD.
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

// PyTorch's checks: momentum, dampening, weight_decay >= 0; nesterov needs momentum > 0 and
// dampening 0. The error names the config key (optim.momentum, ...).
Status ValidateSgdOptions(const SgdOptions& options);

class Sgd final : public Optimizer {
 public:
  static Result<Sgd> Create(const SgdOptions& options, const std::vector<ParamGroupSpan>& groups, FlatRange owned);

  // Same contract as AdamW: params/grads hold exactly the elements of the range they update
  // (params[0] is flat element owned().begin for Step, range.begin for UpdateRange).
  // grad_scale and rounded: as AdamW::Step's (the clipping factor applied as each gradient is
  // read; the bf16 rounding of the updated parameters written beside them).
  void Step(float* params, const float* grads, float lr, float grad_scale, uint16_t* rounded) override;
  using Optimizer::Step;
  void BeginStep() { range_.BeginStep(); }
  Status UpdateRange(float* params, const float* grads, FlatRange range, float lr, float grad_scale = 1.0f,
                     uint16_t* rounded = nullptr);

  int64_t step() const override { return range_.step(); }
  FlatRange owned() const override { return range_.owned(); }
  const SgdOptions& options() const { return options_; }

  // Checkpoint state: the momentum buffer (empty when momentum == 0) and the step.
  std::span<const float> momentum_buffer() const { return buf_; }
  std::span<float> mutable_momentum_buffer() { return buf_; }
  void set_step(int64_t step) override { range_.set_step(step); }
  // The momentum buffer, or nothing with momentum 0.
  std::vector<NamedState> State() override {
    if (buf_.empty()) return {};
    return {{"momentum", buf_}};
  }
  Status ImportState(int64_t step, std::span<const float> momentum_buffer);

 private:
  Sgd(const SgdOptions& options, std::vector<DecaySegment> segments, FlatRange owned);

  SgdOptions options_;
  OwnedSegments range_;
  std::vector<float> buf_;
};

}  // namespace lockstep::optim
