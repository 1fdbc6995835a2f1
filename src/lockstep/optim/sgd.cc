#include "lockstep/optim/sgd.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "lockstep/optim/lanes.h"

namespace lockstep::optim {
namespace {

struct SgdScalars {
  float neg_lr, weight_decay, momentum, one_minus_dampening, grad_scale;
  bool decay, use_momentum, first, nesterov, scaled;
};

// All elements go through this one function (see AdamWLanes for why). The flags are uniform
// over a whole call, so the branches are perfectly predicted; buf is only touched with momentum.
inline void SgdLanes(float* p, const float* g, float* buf, const SgdScalars& s) {
  LaneVec P = Load(p), G = Load(g);
  if (s.scaled) G = Mul(G, Splat(s.grad_scale));
  if (s.decay) G = Add(G, Mul(Splat(s.weight_decay), P));
  if (s.use_momentum) {
    LaneVec B = s.first ? G : Add(Mul(Load(buf), Splat(s.momentum)), Mul(Splat(s.one_minus_dampening), G));
    Store(buf, B);
    G = s.nesterov ? Add(G, Mul(Splat(s.momentum), B)) : B;
  }
  Store(p, Add(P, Mul(Splat(s.neg_lr), G)));
}

Status CheckNonNegative(double x, const char* key) {
  if (x >= 0.0 && std::isfinite(x)) return Status::Ok();
  return Status::InvalidArgument(std::string(key) + ": expected a finite number >= 0, got " + std::to_string(x));
}

}  // namespace

Status ValidateSgdOptions(const SgdOptions& o) {
  LS_RETURN_IF_ERROR(CheckNonNegative(o.momentum, "optim.momentum"));
  LS_RETURN_IF_ERROR(CheckNonNegative(o.dampening, "optim.dampening"));
  LS_RETURN_IF_ERROR(CheckNonNegative(o.weight_decay, "optim.weight_decay"));
  if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0)) {
    return Status::InvalidArgument(
        "optim.nesterov: Nesterov momentum requires optim.momentum > 0 and optim.dampening = 0");
  }
  return Status::Ok();
}

Result<Sgd> Sgd::Create(const SgdOptions& options, const std::vector<ParamGroupSpan>& groups, FlatRange owned) {
  LS_RETURN_IF_ERROR(ValidateSgdOptions(options));
  LS_ASSIGN_OR_RETURN(std::vector<DecaySegment> segments, DecaySegmentsFor(groups, owned));
  return Sgd(options, std::move(segments), owned);
}

Sgd::Sgd(const SgdOptions& options, std::vector<DecaySegment> segments, FlatRange owned)
    : options_(options), range_(std::move(segments), owned) {
  if (options_.momentum != 0.0) buf_.assign(static_cast<size_t>(owned.size()), 0.0f);
}

void Sgd::Step(float* params, const float* grads, float lr, float grad_scale, uint16_t* rounded) {
  BeginStep();
  Status s = UpdateRange(params, grads, owned(), lr, grad_scale, rounded);
  (void)s;  // cannot fail: owned() is inside owned() and step() >= 1
}

Status Sgd::UpdateRange(float* params, const float* grads, FlatRange range, float lr, float grad_scale,
                        uint16_t* rounded) {
  SgdScalars s;
  s.neg_lr = -lr;
  s.weight_decay = static_cast<float>(options_.weight_decay);
  s.momentum = static_cast<float>(options_.momentum);
  s.one_minus_dampening = static_cast<float>(1.0 - options_.dampening);
  s.use_momentum = options_.momentum != 0.0;
  s.first = step() == 1;
  s.nesterov = options_.nesterov;
  s.grad_scale = grad_scale;
  s.scaled = grad_scale != 1.0f;
  return range_.ForEachSegment("Sgd", range, [&](int64_t in_range, int64_t in_state, int64_t n, bool decay) {
    SgdScalars seg = s;
    seg.decay = decay && options_.weight_decay != 0.0;
    ParallelPieces(n, [&](int64_t at, int64_t len) {
      float* p = params + in_range + at;
      const float* g = grads + in_range + at;
      if (seg.use_momentum)
        ApplyLanes(
            len, [&](float* p, const float* g, float* b) { SgdLanes(p, g, b, seg); }, p, g,
            buf_.data() + in_state + at);
      else
        ApplyLanes(
            len, [&](float* p, const float* g) { SgdLanes(p, g, nullptr, seg); }, p, g);
      RoundPiece(p, rounded, in_range + at, len);
    });
  });
}

Status Sgd::ImportState(int64_t step, std::span<const float> momentum_buffer) {
  if (momentum_buffer.size() != buf_.size()) {
    return Status::InvalidArgument("SGD momentum buffer for range " + RangeText(owned()) + " needs " +
                                   std::to_string(buf_.size()) + " elements, got " +
                                   std::to_string(momentum_buffer.size()));
  }
  if (step < 0) return Status::InvalidArgument("SGD state step must be >= 0, got " + std::to_string(step));
  std::copy(momentum_buffer.begin(), momentum_buffer.end(), buf_.begin());
  set_step(step);
  return Status::Ok();
}

}  // namespace lockstep::optim
