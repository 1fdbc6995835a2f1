#include "lockstep/parallel/diloco.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "lockstep/core/bf16.h"

namespace lockstep::parallel {

std::vector<int64_t> CutFragments(const nn::ParameterStore& params, int fragments) {
  const int64_t total = params.numel();
  std::vector<int64_t> begin{0};
  for (int i = 0; i < params.size() && static_cast<int>(begin.size()) < fragments; ++i) {
    const nn::ParamInfo& p = params.info(i);
    // Cut before parameter i once the current fragment holds its share of what is left.
    const int64_t left = total - begin.back();
    const int64_t share = left / (fragments - static_cast<int64_t>(begin.size()) + 1);
    if (p.offset > begin.back() && p.offset - begin.back() >= share) begin.push_back(p.offset);
  }
  // Too few cuts (a parameter larger than a share): cut at the remaining boundaries in order.
  for (int i = params.size() - 1; static_cast<int>(begin.size()) < fragments && i > 0; --i) {
    const int64_t at = params.info(i).offset;
    bool used = false;
    for (int64_t b : begin) used = used || b == at;
    if (!used) begin.push_back(at);
    std::sort(begin.begin(), begin.end());
  }
  begin.push_back(total);
  return begin;
}

Result<std::unique_ptr<DilocoSync>> DilocoSync::Create(std::shared_ptr<comm::Communicator> dp,
                                                       const nn::ParameterStore& params, const DilocoOptions& o) {
  if (o.inner_steps < 1)
    return Status::InvalidArgument("train.diloco_inner_steps = " + std::to_string(o.inner_steps) +
                                   ": expected at least 1");
  if (o.fragments < 1 || o.fragments > params.size())
    return Status::InvalidArgument("train.diloco_fragments = " + std::to_string(o.fragments) +
                                   ": expected 1 to the model's " + std::to_string(params.size()) + " parameters");
  // A fragment is due again H steps after it was: its exchange must be over by then.
  if (o.overlap_steps < 0 || o.overlap_steps >= o.inner_steps)
    return Status::InvalidArgument("train.diloco_overlap_steps = " + std::to_string(o.overlap_steps) +
                                   ": expected 0 to diloco_inner_steps - 1 = " + std::to_string(o.inner_steps - 1));
  if (!(o.merge_alpha >= 0 && o.merge_alpha <= 1))
    return Status::InvalidArgument("train.diloco_merge_alpha = " + std::to_string(o.merge_alpha) +
                                   ": expected a number in [0, 1]");
  std::unique_ptr<DilocoSync> d(new DilocoSync(std::move(dp), o));
  d->begin_ = CutFragments(params, o.fragments);
  const size_t n = static_cast<size_t>(params.numel());
  d->anchor_.assign(n, 0.0f);
  d->momentum_.assign(n, 0.0f);
  d->pending_.assign(n, 0.0f);
  // Overlapping, the sent deltas stay as they were (a checkpoint holds them) and the sums land
  // beside them; blocking, the sum replaces the delta in place.
  if (o.overlap_steps > 0) d->received_.assign(n, 0.0f);
  if (o.bf16) {
    d->wire_out_.assign(n, 0);
    if (o.overlap_steps > 0) d->wire_in_.assign(n, 0);
  }
  return d;
}

void DilocoSync::Reset(const float* params) {
  std::copy(params, params + anchor_.size(), anchor_.begin());
  std::fill(momentum_.begin(), momentum_.end(), 0.0f);
}

bool DilocoSync::Due(int f, int64_t step) const {
  const int64_t h = o_.inner_steps;
  const int64_t offset = (static_cast<int64_t>(f) + 1) * h / fragments();
  const int64_t done = step + 1;
  return done >= offset && (done - offset) % h == 0;
}

Result<int> DilocoSync::AfterStep(int64_t step, bool last, float* params) {
  int synced = 0;
  // Exchanges whose time has come (at the last step: all), in the order they started.
  for (size_t i = 0; i < in_flight_.size();) {
    if (!last && in_flight_[i].finish_step != step) {
      ++i;
      continue;
    }
    const InFlight e = in_flight_[i];
    in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(i));
    LS_RETURN_IF_ERROR(Finish(e, o_.merge_alpha, params));
    ++synced;
  }
  for (int f = 0; f < fragments(); ++f) {
    if (!last && !Due(f, step)) continue;
    TakeDelta(f, params);
    if (overlapping() && !last) {
      StartExchange(f, step + o_.overlap_steps);
      continue;
    }
    StartExchange(f, step);
    const InFlight e = in_flight_.back();
    in_flight_.pop_back();
    LS_RETURN_IF_ERROR(Finish(e, /*alpha=*/0, params));
    ++synced;
  }
  return synced;
}

Status DilocoSync::Relaunch(int64_t next_step) {
  if (!overlapping()) return Status::Ok();
  // In flight after step next_step - 1: due at some step s before it, with s + tau after it.
  // (At most one such s a fragment: tau < H.)
  for (int64_t s = std::max<int64_t>(0, next_step - o_.overlap_steps); s < next_step; ++s)
    for (int f = 0; f < fragments(); ++f)
      if (Due(f, s)) StartExchange(f, s + o_.overlap_steps);
  return Status::Ok();
}

void DilocoSync::TakeDelta(int f, const float* params) {
  const size_t a = static_cast<size_t>(lo(f)), n = static_cast<size_t>(hi(f) - lo(f));
  for (size_t i = a; i < a + n; ++i) pending_[i] = anchor_[i] - params[i];
  if (o_.bf16) {
    // Rounded once, before the sum (the backend sums bf16 in fp32 and rounds the result); the
    // rounded value is what a checkpoint keeps, so a restarted exchange sends the same bits.
    F32ToBf16(pending_.data() + a, wire_out_.data() + a, n);
    Bf16ToF32(wire_out_.data() + a, pending_.data() + a, n);
  }
}

void DilocoSync::StartExchange(int f, int64_t finish_step) {
  const size_t a = static_cast<size_t>(lo(f)), n = static_cast<size_t>(hi(f) - lo(f));
  InFlight e{f, finish_step, nullptr};
  const int replicas = dp_->size();
  if (replicas > 1) {
    float* sum = overlapping() ? received_.data() + a : pending_.data() + a;
    if (o_.bf16) {
      F32ToBf16(pending_.data() + a, wire_out_.data() + a, n);  // exact: pending_ holds bf16 values
      uint16_t* in = overlapping() ? wire_in_.data() + a : wire_out_.data() + a;
      e.work = dp_->Allreduce(wire_out_.data() + a, in, n, comm::DType::kBF16, comm::ReduceOp::kSum);
    } else if (o_.deterministic) {
      e.work = dp_->DeterministicAllreduceF32(pending_.data() + a, sum, n, replicas);
    } else {
      e.work = dp_->Allreduce(pending_.data() + a, sum, n, comm::DType::kF32, comm::ReduceOp::kSum);
    }
  }
  in_flight_.push_back(std::move(e));
}

Status DilocoSync::Finish(const InFlight& e, double alpha, float* params) {
  const int f = e.fragment;
  const size_t a = static_cast<size_t>(lo(f)), n = static_cast<size_t>(hi(f) - lo(f));
  float* delta = overlapping() ? received_.data() + a : pending_.data() + a;
  if (e.work != nullptr) {
    LS_RETURN_IF_ERROR(e.work->Wait());
    if (o_.bf16) Bf16ToF32(overlapping() ? wire_in_.data() + a : wire_out_.data() + a, delta, n);
  } else if (overlapping()) {
    std::copy(pending_.data() + a, pending_.data() + a + n, delta);  // one replica: its own delta
  }
  const float inv = 1.0f / static_cast<float>(dp_->size());
  for (size_t i = 0; i < n; ++i) {
    delta[i] *= inv;
    if (!std::isfinite(delta[i]))
      return Status::NonFinite("DiLoCo: the averaged outer gradient of fragment " + std::to_string(f) +
                               " is not finite (element " + std::to_string(a + i) +
                               "); stopped before the outer update, the newest checkpoint is the last good one");
  }
  const float mu = static_cast<float>(o_.outer_momentum), lr = static_cast<float>(o_.outer_lr);
  const float keep = static_cast<float>(alpha), take = static_cast<float>(1 - alpha);
  for (size_t i = 0; i < n; ++i) {
    float& buf = momentum_[a + i];
    buf = mu * buf + delta[i];
    const float update = delta[i] + mu * buf;
    float& anchor = anchor_[a + i];
    anchor -= lr * update;
    params[a + i] = alpha == 0 ? anchor : keep * params[a + i] + take * anchor;
  }
  return Status::Ok();
}

}  // namespace lockstep::parallel
