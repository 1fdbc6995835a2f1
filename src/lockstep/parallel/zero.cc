#include "lockstep/parallel/zero.h"

#include <algorithm>
#include <cstring>

namespace lockstep::parallel {

optim::FlatRange ShardRange(int64_t numel, int rank, int world) {
  const int64_t chunk = (numel + world - 1) / world;
  const int64_t begin = std::min<int64_t>(numel, rank * chunk);
  return {begin, std::min<int64_t>(numel, begin + chunk)};
}

ZeroBytes ExpectedZeroBytes(int64_t numel, int dp, int stage) {
  const int64_t psi = numel;
  ZeroBytes b{4 * psi, 4 * psi, 8 * psi};
  if (stage >= 1) b.optimizer = 8 * psi / dp;
  if (stage >= 2) b.grads = 4 * psi / dp;
  if (stage >= 3) b.params = 4 * psi / dp;
  return b;
}

ShardedParamGather::ShardedParamGather(std::shared_ptr<comm::Communicator> dp, int64_t numel)
    : dp_(std::move(dp)),
      numel_(numel),
      chunk_((numel + dp_->size() - 1) / dp_->size()),
      staging_(static_cast<size_t>(chunk_ * dp_->size()), 0.0f) {}

Status ShardedParamGather::Gather(float* params) {
  const optim::FlatRange mine = ShardRange(numel_, dp_->rank(), dp_->size());
  float* block = staging_.data() + static_cast<size_t>(dp_->rank() * chunk_);
  std::memcpy(block, params + mine.begin, static_cast<size_t>(mine.size()) * sizeof(float));
  LS_RETURN_IF_ERROR(dp_->AllGather(block, staging_.data(), static_cast<size_t>(chunk_), comm::DType::kF32)->Wait());
  std::memcpy(params, staging_.data(), static_cast<size_t>(numel_) * sizeof(float));
  return Status::Ok();
}

}  // namespace lockstep::parallel
