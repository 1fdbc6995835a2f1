// AdamW with PyTorch semantics (torch.optim.AdamW, non-amsgrad, non-fused), on a range of the
// model's flat parameter buffer.
//
// Per element, step t (t starts at 1), in this order and with these roundings (scalars are
// computed in double like PyTorch's Python floats, then used as float):
//   p = p * (1 - lr*wd)                       only where the parameter has decay=true
//   m = m*b1 + (1-b1)*g
//   v = v*b2 + ((1-b2)*g)*g
//   p = p + (-(lr / (1 - b1^t)) * m) / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
// The optimizer owns state (m, v) only for `owned`, the range given at creation: a ZeRO shard
// owner creates it with its shard and never allocates state for the rest of the model. The
// update of one element depends only on that element's (p, g, m, v), the step and lr — never
// on where a range starts or ends — so stepping any partition of the buffer gives bit-identical
// results to stepping it whole (the deterministic mode relies on this).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/optim/flat_update.h"
#include "lockstep/optim/optimizer.h"
#include "lockstep/optim/param_groups.h"

namespace lockstep::optim {

struct AdamWOptions {
  // Defaults of torch.optim.AdamW.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// Checks the ranges PyTorch checks (0 <= beta < 1, eps >= 0, weight_decay >= 0); the error
// names the config key (optim.beta1, ...).
Status ValidateAdamWOptions(const AdamWOptions& options);

class AdamW final : public Optimizer {
 public:
  // `groups` describe the whole flat buffer (offsets in flat coordinates); `owned` is the range
  // whose state this instance holds. m and v start at zero, step at 0.
  static Result<AdamW> Create(const AdamWOptions& options, const std::vector<ParamGroupSpan>& groups, FlatRange owned);

  // One full optimizer step over the owned range: BeginStep() then UpdateRange(owned).
  // params/grads hold exactly the owned elements: params[0] is flat element owned().begin.
  // grad_scale != 1: every gradient is read as grads[i] * grad_scale (the clipping factor,
  // ClipFactor), in float, as a clipping pass would have stored it.
  // rounded != nullptr (laid out like params): each updated parameter's bf16 rounding is also
  // written there while its piece is still in cache (mixed precision's weight copy, without a
  // second pass over the parameters; the same bits as rounding them afterwards).
  void Step(float* params, const float* grads, float lr, float grad_scale, uint16_t* rounded) override;
  using Optimizer::Step;

  // The same step in pieces: BeginStep() advances t once, then UpdateRange() is called on
  // disjoint sub-ranges of owned() that together cover what should be stepped (what an update
  // overlapped with communication would do bucket by bucket; today only the tests, which show
  // that pieces give the bits of the whole, call it).
  // params/grads hold exactly the elements of `range`: params[0] is flat element range.begin.
  // Fails (Internal) if `range` is not inside owned() or BeginStep() was never called.
  void BeginStep() { range_.BeginStep(); }
  Status UpdateRange(float* params, const float* grads, FlatRange range, float lr, float grad_scale = 1.0f,
                     uint16_t* rounded = nullptr);

  // Number of BeginStep()s so far: PyTorch's state["step"].
  int64_t step() const override { return range_.step(); }
  FlatRange owned() const override { return range_.owned(); }
  const AdamWOptions& options() const { return options_; }

  // Checkpoint state: m and v for the owned range (element i is flat element owned().begin+i)
  // and the step. Import copies spans that must have exactly owned().size() elements; the
  // mutable views let a checkpoint reader fill the state in place.
  std::span<const float> m() const { return m_; }
  std::span<const float> v() const { return v_; }
  std::span<float> mutable_m() { return m_; }
  std::span<float> mutable_v() { return v_; }
  void set_step(int64_t step) override { range_.set_step(step); }
  std::vector<NamedState> State() override { return {{"exp_avg", m_}, {"exp_avg_sq", v_}}; }
  Status ImportState(int64_t step, std::span<const float> m, std::span<const float> v);

 private:
  AdamW(const AdamWOptions& options, std::vector<DecaySegment> segments, FlatRange owned);

  AdamWOptions options_;
  OwnedSegments range_;
  std::vector<float> m_;
  std::vector<float> v_;
};

}  // namespace lockstep::optim
