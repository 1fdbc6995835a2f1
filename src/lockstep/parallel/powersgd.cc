#include "lockstep/parallel/powersgd.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "lockstep/core/rng.h"

namespace lockstep::parallel {
namespace {

// Makes the r columns of p (n x r, row-major) orthonormal, in order (modified Gram-Schmidt).
// A column with nothing left after the projections stays zero.
void Orthonormalize(float* p, int64_t n, int r) {
  for (int c = 0; c < r; ++c) {
    for (int d = 0; d < c; ++d) {
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(p[i * r + c]) * p[i * r + d];
      const float f = static_cast<float>(dot);
      for (int64_t i = 0; i < n; ++i) p[i * r + c] -= f * p[i * r + d];
    }
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(p[i * r + c]) * p[i * r + c];
    if (sq <= 0) continue;
    const float inv = static_cast<float>(1.0 / std::sqrt(sq));
    for (int64_t i = 0; i < n; ++i) p[i * r + c] *= inv;
  }
}

// sum of a[j] * b[j] in a fixed order: 16 lanes (what the compiler vectorises without
// reassociating), then the lanes added in order, so the bits never depend on threads or ISA width.
float Dot(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 16;
  float lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += a[j + l] * b[j + l];
  float sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += lane[l];
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

// y += alpha * x
void Axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += alpha * x[j];
}

}  // namespace

bool PowerSgdCompresses(const std::vector<int64_t>& shape, int64_t numel, int64_t rank) {
  if (shape.size() < 2 || shape[0] <= 0) return false;
  const int64_t n = shape[0], m = numel / n;
  return rank * (n + m) * 2 <= n * m;
}

PowerSgdVolume PowerSgdVolumeOf(const std::vector<std::vector<int64_t>>& shapes, int64_t rank) {
  PowerSgdVolume v;
  for (const std::vector<int64_t>& s : shapes) {
    int64_t numel = 1;
    for (int64_t d : s) numel *= d;
    if (!PowerSgdCompresses(s, numel, rank)) {
      v.plain += numel;
      continue;
    }
    v.p += s[0] * rank;
    v.q += numel / s[0] * rank;
  }
  return v;
}

Result<std::unique_ptr<PowerSgd>> PowerSgd::Create(std::shared_ptr<comm::Communicator> dp,
                                                   const nn::ParameterStore& params, int slots,
                                                   const PowerSgdOptions& o) {
  std::unique_ptr<PowerSgd> s(new PowerSgd(std::move(dp), o));
  const int64_t r = o.rank;
  for (int i = 0; i < params.size(); ++i) {
    const nn::ParamInfo& p = params.info(i);
    const int64_t n = p.shape.empty() ? 1 : p.shape[0], m = p.numel / std::max<int64_t>(n, 1);
    if (PowerSgdCompresses(p.shape, p.numel, r)) {
      s->matrices_.push_back({p.offset, n, m, s->p_numel_, s->q_numel_});
      s->p_numel_ += n * r;
      s->q_numel_ += m * r;
    } else {
      s->plain_.push_back({p.offset, p.offset + p.numel});
      s->plain_numel_ += p.numel;
    }
  }
  if (s->matrices_.empty())
    return Status::InvalidArgument("train.powersgd_rank = " + std::to_string(o.rank) +
                                   " is too large: no parameter matrix would be compressed at least 2x");
  s->errors_.assign(static_cast<size_t>(slots), std::vector<float>(static_cast<size_t>(params.numel()), 0.0f));
  s->q_.assign(static_cast<size_t>(params.numel()), 0.0f);
  for (size_t j = 0; j < s->matrices_.size(); ++j) {
    const Matrix& mx = s->matrices_[j];
    Rng rng(o.seed, 0x5057u + j);  // "PW": a stream of its own per matrix
    for (int64_t e = 0; e < mx.m * r; ++e) s->q_[static_cast<size_t>(mx.offset + e)] = rng.Normal();  // Q^T, r x m
  }
  return s;
}

Status PowerSgd::SumSlots(const float* packed, int64_t count, float* out) {
  const size_t n = static_cast<size_t>(count);
  const int slots = static_cast<int>(errors_.size());
  if (o_.deterministic) return dp_->DeterministicAllreduceF32(packed, out, n, o_.total_slots)->Wait();
  std::copy(packed, packed + count, out);
  for (int k = 1; k < slots; ++k)
    for (size_t i = 0; i < n; ++i) out[i] += packed[static_cast<size_t>(k) * n + i];
  if (dp_->size() == 1) return Status::Ok();
  return dp_->Allreduce(out, out, n, comm::DType::kF32, comm::ReduceOp::kSum)->Wait();
}

Status PowerSgd::Reduce(float* const* slots, float* out) {
  const int k_slots = static_cast<int>(errors_.size());
  const int r = o_.rank;
  // Error feedback, then the parameters sent as they are.
  for (int k = 0; k < k_slots; ++k)
    for (const Matrix& mx : matrices_) {
      float* g = slots[k] + mx.offset;
      const float* e = errors_[static_cast<size_t>(k)].data() + mx.offset;
      for (int64_t i = 0; i < mx.n * mx.m; ++i) g[i] += e[i];
    }
  if (plain_numel_ > 0) {
    packed_.resize(static_cast<size_t>(k_slots * plain_numel_));
    for (int k = 0; k < k_slots; ++k) {
      float* at = packed_.data() + k * plain_numel_;
      for (auto [lo, hi] : plain_) at = std::copy(slots[k] + lo, slots[k] + hi, at);
    }
    summed_.resize(static_cast<size_t>(plain_numel_));
    LS_RETURN_IF_ERROR(SumSlots(packed_.data(), plain_numel_, summed_.data()));
    const float* from = summed_.data();
    for (auto [lo, hi] : plain_) {
      std::copy(from, from + (hi - lo), out + lo);
      from += hi - lo;
    }
  }
  // P = sum M Q, orthonormalised (Q kept transposed, r x m, so every product is unit-stride).
  packed_.assign(static_cast<size_t>(k_slots * p_numel_), 0.0f);
  for (int k = 0; k < k_slots; ++k)
    for (const Matrix& mx : matrices_) {
      const float* a = slots[k] + mx.offset;
      const float* qt = q_.data() + mx.offset;
      float* p = packed_.data() + k * p_numel_ + mx.p_at;
      for (int64_t i = 0; i < mx.n; ++i)
        for (int c = 0; c < r; ++c) p[i * r + c] = Dot(a + i * mx.m, qt + c * mx.m, mx.m);
    }
  p_.resize(static_cast<size_t>(p_numel_));
  LS_RETURN_IF_ERROR(SumSlots(packed_.data(), p_numel_, p_.data()));
  for (const Matrix& mx : matrices_) Orthonormalize(p_.data() + mx.p_at, mx.n, r);
  // Q = sum M^T P (transposed: row c is sum_i P[i][c] M[i][:]): the next step's warm start.
  packed_.assign(static_cast<size_t>(k_slots * q_numel_), 0.0f);
  for (int k = 0; k < k_slots; ++k)
    for (const Matrix& mx : matrices_) {
      const float* a = slots[k] + mx.offset;
      const float* p = p_.data() + mx.p_at;
      float* qt = packed_.data() + k * q_numel_ + mx.q_at;
      for (int64_t i = 0; i < mx.n; ++i)
        for (int c = 0; c < r; ++c) Axpy(p[i * r + c], a + i * mx.m, qt + c * mx.m, mx.m);
    }
  summed_.resize(static_cast<size_t>(q_numel_));
  LS_RETURN_IF_ERROR(SumSlots(packed_.data(), q_numel_, summed_.data()));
  // The approximation, and each slot's error: what it sent minus its share of what arrived.
  const float share = 1.0f / static_cast<float>(o_.total_slots);
  std::vector<float>& row = delta_;
  for (const Matrix& mx : matrices_) {
    const float* p = p_.data() + mx.p_at;
    const float* qt = summed_.data() + mx.q_at;
    std::copy(qt, qt + mx.m * r, q_.data() + mx.offset);
    row.resize(static_cast<size_t>(mx.m));
    for (int64_t i = 0; i < mx.n; ++i) {
      std::fill(row.begin(), row.end(), 0.0f);
      for (int c = 0; c < r; ++c) Axpy(p[i * r + c], qt + c * mx.m, row.data(), mx.m);
      const int64_t at = mx.offset + i * mx.m;
      // (out may be the one slot itself: the errors are taken before it is overwritten)
      for (int k = 0; k < k_slots; ++k) {
        float* e = errors_[static_cast<size_t>(k)].data() + at;
        const float* g = slots[k] + at;
        for (int64_t j = 0; j < mx.m; ++j) e[j] = g[j] - row[static_cast<size_t>(j)] * share;
      }
      std::copy(row.begin(), row.end(), out + at);
    }
  }
  return Status::Ok();
}

}  // namespace lockstep::parallel
