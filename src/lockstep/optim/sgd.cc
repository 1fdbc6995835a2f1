#include "lockstep/optim/sgd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "lockstep/optim/lanes.h"

namespace lockstep::optim {
namespace {

struct SgdScalars {
  float neg_lr, weight_decay, momentum, one_minus_dampening;
  bool decay, use_momentum, first, nesterov;
};

// All elements go through this one function (see AdamWLanes for why). The flags are uniform
// over a whole call, so the branches are perfectly predicted.
inline void SgdLanes(float* p, const float* g, float* buf, const SgdScalars& s) {
  LaneVec P = Load(p), G = Load(g);
  if (s.decay) G = Add(G, Mul(Splat(s.weight_decay), P));
  if (s.use_momentum) {
    LaneVec B = s.first ? G : Add(Mul(Load(buf), Splat(s.momentum)), Mul(Splat(s.one_minus_dampening), G));
    Store(buf, B);
    G = s.nesterov ? Add(G, Mul(Splat(s.momentum), B)) : B;
  }
  Store(p, Add(P, Mul(Splat(s.neg_lr), G)));
}

void SgdKernel(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  int64_t i = 0;
  float dummy[kLanes] = {};
  for (; i + kLanes <= n; i += kLanes) SgdLanes(p + i, g + i, s.use_momentum ? buf + i : dummy, s);
  int64_t rest = n - i;
  if (rest == 0) return;
  float tp[kLanes] = {}, tg[kLanes] = {}, tb[kLanes] = {};
  size_t bytes = static_cast<size_t>(rest) * sizeof(float);
  std::memcpy(tp, p + i, bytes);
  std::memcpy(tg, g + i, bytes);
  if (s.use_momentum) std::memcpy(tb, buf + i, bytes);
  SgdLanes(tp, tg, tb, s);
  std::memcpy(p + i, tp, bytes);
  if (s.use_momentum) std::memcpy(buf + i, tb, bytes);
}

std::string RangeText(FlatRange r) { return "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")"; }

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
    : options_(options), segments_(std::move(segments)), owned_(owned) {
  if (options_.momentum != 0.0) buf_.assign(static_cast<size_t>(owned.size()), 0.0f);
}

void Sgd::Step(float* params, const float* grads, float lr) {
  BeginStep();
  Status s = UpdateRange(params, grads, owned_, lr);
  (void)s;  // cannot fail: owned_ is inside owned_ and step_ >= 1
}

Status Sgd::UpdateRange(float* params, const float* grads, FlatRange range, float lr) {
  if (!owned_.Contains(range) || range.begin > range.end) {
    return Status::Internal("Sgd::UpdateRange: range " + RangeText(range) + " is not inside the owned range " +
                            RangeText(owned_));
  }
  if (step_ < 1) return Status::Internal("Sgd::UpdateRange called before BeginStep");
  SgdScalars s;
  s.neg_lr = -lr;
  s.weight_decay = static_cast<float>(options_.weight_decay);
  s.momentum = static_cast<float>(options_.momentum);
  s.one_minus_dampening = static_cast<float>(1.0 - options_.dampening);
  s.use_momentum = options_.momentum != 0.0;
  s.first = step_ == 1;
  s.nesterov = options_.nesterov;
  for (const DecaySegment& seg : ClipSegments(segments_, range)) {
    s.decay = seg.decay && options_.weight_decay != 0.0;
    int64_t in_range = seg.range.begin - range.begin;
    float* buf = s.use_momentum ? buf_.data() + (seg.range.begin - owned_.begin) : nullptr;
    SgdKernel(params + in_range, grads + in_range, buf, seg.range.size(), s);
  }
  return Status::Ok();
}

Status Sgd::ImportState(int64_t step, std::span<const float> momentum_buffer) {
  if (momentum_buffer.size() != buf_.size()) {
    return Status::InvalidArgument("SGD momentum buffer for range " + RangeText(owned_) + " needs " +
                                   std::to_string(buf_.size()) + " elements, got " +
                                   std::to_string(momentum_buffer.size()));
  }
  if (step < 0) return Status::InvalidArgument("SGD state step must be >= 0, got " + std::to_string(step));
  std::copy(momentum_buffer.begin(), momentum_buffer.end(), buf_.begin());
  step_ = step;
  return Status::Ok();
}

}  // namespace lockstep::optim
