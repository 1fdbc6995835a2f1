#include "lockstep/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "lockstep/optim/lanes.h"

namespace lockstep::optim {
namespace {

// Per-step constants, rounded to float once (PyTorch passes its Python-float scalars to float
// kernels the same way).
struct AdamWScalars {
  float decay_factor, b1, one_minus_b1, b2, one_minus_b2, neg_step_size, bc2_sqrt, eps;
  float grad_scale;
  bool scaled;  // grad_scale != 1
};

// The update of kLanes consecutive elements; every element goes through this one function
// (ApplyLanes runs it on the tail's padded copies too; zeros are harmless: v=0 gives
// denom = eps > 0).
template <bool kDecay>
inline void AdamWLanes(float* p, const float* g, float* m, float* v, const AdamWScalars& s) {
  LaneVec P = Load(p), G = Load(g), M = Load(m), V = Load(v);
  if (s.scaled) G = Mul(G, Splat(s.grad_scale));
  if constexpr (kDecay) P = Mul(P, Splat(s.decay_factor));
  M = Add(Mul(M, Splat(s.b1)), Mul(Splat(s.one_minus_b1), G));
  V = Add(Mul(V, Splat(s.b2)), Mul(Mul(Splat(s.one_minus_b2), G), G));
  LaneVec denom = Add(Div(Sqrt(V), Splat(s.bc2_sqrt)), Splat(s.eps));
  P = Add(P, Div(Mul(Splat(s.neg_step_size), M), denom));
  Store(p, P);
  Store(m, M);
  Store(v, V);
}

}  // namespace

Status ValidateAdamWOptions(const AdamWOptions& o) {
  if (!(o.beta1 >= 0.0 && o.beta1 < 1.0)) {
    return Status::InvalidArgument("optim.beta1: expected a number in [0, 1), got " + std::to_string(o.beta1));
  }
  if (!(o.beta2 >= 0.0 && o.beta2 < 1.0)) {
    return Status::InvalidArgument("optim.beta2: expected a number in [0, 1), got " + std::to_string(o.beta2));
  }
  if (!(o.eps >= 0.0) || !std::isfinite(o.eps)) {
    return Status::InvalidArgument("optim.eps: expected a finite number >= 0, got " + std::to_string(o.eps));
  }
  if (!(o.weight_decay >= 0.0) || !std::isfinite(o.weight_decay)) {
    return Status::InvalidArgument("optim.weight_decay: expected a finite number >= 0, got " +
                                   std::to_string(o.weight_decay));
  }
  return Status::Ok();
}

Result<AdamW> AdamW::Create(const AdamWOptions& options, const std::vector<ParamGroupSpan>& groups, FlatRange owned) {
  LS_RETURN_IF_ERROR(ValidateAdamWOptions(options));
  LS_ASSIGN_OR_RETURN(std::vector<DecaySegment> segments, DecaySegmentsFor(groups, owned));
  return AdamW(options, std::move(segments), owned);
}

AdamW::AdamW(const AdamWOptions& options, std::vector<DecaySegment> segments, FlatRange owned)
    : options_(options),
      range_(std::move(segments), owned),
      m_(static_cast<size_t>(owned.size()), 0.0f),
      v_(static_cast<size_t>(owned.size()), 0.0f) {}

void AdamW::Step(float* params, const float* grads, float lr, float grad_scale, uint16_t* rounded) {
  BeginStep();
  Status s = UpdateRange(params, grads, owned(), lr, grad_scale, rounded);
  (void)s;  // cannot fail: owned() is inside owned() and step() >= 1
}

Status AdamW::UpdateRange(float* params, const float* grads, FlatRange range, float lr, float grad_scale,
                          uint16_t* rounded) {
  const double t = static_cast<double>(step());
  const double bc1 = 1.0 - std::pow(options_.beta1, t);
  const double bc2 = 1.0 - std::pow(options_.beta2, t);
  AdamWScalars s;
  s.decay_factor = static_cast<float>(1.0 - static_cast<double>(lr) * options_.weight_decay);
  s.b1 = static_cast<float>(options_.beta1);
  s.one_minus_b1 = static_cast<float>(1.0 - options_.beta1);
  s.b2 = static_cast<float>(options_.beta2);
  s.one_minus_b2 = static_cast<float>(1.0 - options_.beta2);
  s.neg_step_size = static_cast<float>(-(static_cast<double>(lr) / bc1));
  s.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  s.eps = static_cast<float>(options_.eps);
  s.grad_scale = grad_scale;
  s.scaled = grad_scale != 1.0f;
  const bool any_decay = options_.weight_decay != 0.0;

  return range_.ForEachSegment("AdamW", range, [&](int64_t in_range, int64_t in_state, int64_t n, bool decay) {
    float* m = m_.data() + in_state;
    float* v = v_.data() + in_state;
    ParallelPieces(n, [&](int64_t at, int64_t len) {
      float *p = params + in_range + at, *m_at = m + at, *v_at = v + at;
      const float* g = grads + in_range + at;
      if (decay && any_decay)
        ApplyLanes(
            len, [&](float* p, const float* g, float* m, float* v) { AdamWLanes<true>(p, g, m, v, s); }, p, g, m_at,
            v_at);
      else
        ApplyLanes(
            len, [&](float* p, const float* g, float* m, float* v) { AdamWLanes<false>(p, g, m, v, s); }, p, g, m_at,
            v_at);
      RoundPiece(p, rounded, in_range + at, len);
    });
  });
}

Status AdamW::ImportState(int64_t step, std::span<const float> m, std::span<const float> v) {
  const size_t want = static_cast<size_t>(owned().size());
  if (m.size() != want || v.size() != want) {
    return Status::InvalidArgument("AdamW state for range " + RangeText(owned()) + " needs " + std::to_string(want) +
                                   " elements per moment, got m=" + std::to_string(m.size()) +
                                   " v=" + std::to_string(v.size()));
  }
  if (step < 0) return Status::InvalidArgument("AdamW state step must be >= 0, got " + std::to_string(step));
  std::copy(m.begin(), m.end(), m_.begin());
  std::copy(v.begin(), v.end(), v_.begin());
  set_step(step);
  return Status::Ok();
}

}  // namespace lockstep::optim
