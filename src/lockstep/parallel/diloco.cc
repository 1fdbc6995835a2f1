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
  std::unique_ptr<DilocoSync> d(new DilocoSync(std::move(dp), o));
  d->begin_ = CutFragments(params, o.fragments);
  const size_t n = static_cast<size_t>(params.numel());
  d->anchor_.assign(n, 0.0f);
  d->momentum_.assign(n, 0.0f);
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
  for (int f = 0; f < fragments(); ++f) {
    if (!last && !Due(f, step)) continue;
    LS_RETURN_IF_ERROR(SyncFragment(f, params));
    ++synced;
  }
  return synced;
}

Status DilocoSync::SyncFragment(int f, float* params) {
  const int64_t lo = begin_[static_cast<size_t>(f)], hi = begin_[static_cast<size_t>(f) + 1];
  const size_t n = static_cast<size_t>(hi - lo);
  delta_.resize(n);
  for (size_t i = 0; i < n; ++i) delta_[i] = anchor_[lo + i] - params[lo + i];
  const int replicas = dp_->size();
  if (o_.bf16) {
    // Rounded once before the sum; the backend sums bf16 in fp32 and rounds the result.
    wire_.resize(n);
    F32ToBf16(delta_.data(), wire_.data(), n);
    if (replicas > 1)
      LS_RETURN_IF_ERROR(
          dp_->Allreduce(wire_.data(), wire_.data(), n, comm::DType::kBF16, comm::ReduceOp::kSum)->Wait());
    Bf16ToF32(wire_.data(), delta_.data(), n);
  } else if (replicas > 1) {
    if (o_.deterministic)
      LS_RETURN_IF_ERROR(dp_->DeterministicAllreduceF32(delta_.data(), delta_.data(), n, replicas)->Wait());
    else
      LS_RETURN_IF_ERROR(
          dp_->Allreduce(delta_.data(), delta_.data(), n, comm::DType::kF32, comm::ReduceOp::kSum)->Wait());
  }
  const float inv = 1.0f / static_cast<float>(replicas);
  for (size_t i = 0; i < n; ++i) {
    delta_[i] *= inv;
    if (!std::isfinite(delta_[i]))
      return Status::NonFinite("DiLoCo: the averaged outer gradient of fragment " + std::to_string(f) +
                               " is not finite (element " + std::to_string(lo + static_cast<int64_t>(i)) +
                               "); stopped before the outer update, the newest checkpoint is the last good one");
  }
  const float mu = static_cast<float>(o_.outer_momentum), lr = static_cast<float>(o_.outer_lr);
  for (size_t i = 0; i < n; ++i) {
    float& buf = momentum_[lo + i];
    buf = mu * buf + delta_[i];
    const float update = delta_[i] + mu * buf;
    anchor_[lo + i] -= lr * update;
    params[lo + i] = anchor_[lo + i];
  }
  return Status::Ok();
}

}  // namespace lockstep::parallel
