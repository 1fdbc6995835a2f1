#include "lockstep/parallel/tp_context.h"

#include <algorithm>
#include <cstring>

#include "lockstep/tensor/check.h"

namespace lockstep::parallel {

TpContext::TpContext(std::shared_ptr<comm::Communicator> comm, int slices, bool deterministic)
    : comm_(std::move(comm)),
      size_(comm_->size()),
      rank_(comm_->rank()),
      slices_(slices),
      deterministic_(deterministic) {
  LS_CHECK(slices_ >= size_ && slices_ % size_ == 0)
      << "TpContext: " << slices_ << " slices over " << size_ << " ranks";
  LS_CHECK(deterministic_ || slices_ == size_) << "TpContext: canonical slices need deterministic mode";
}

void TpContext::Check(const comm::WorkHandle& work) {
  Status s = work->Wait();
  if (!s.ok() && status_.ok()) status_ = s;
}

void TpContext::SumSlices(const float* partials, float* out, size_t count) {
  if (deterministic_) {
    Check(comm_->DeterministicAllreduceF32(partials, out, count, slices_));
    return;
  }
  if (size_ == 1) {
    if (out != partials) std::memcpy(out, partials, count * sizeof(float));
    return;
  }
  Check(comm_->Allreduce(partials, out, count, comm::DType::kF32, comm::ReduceOp::kSum));
}

void TpContext::MaxInPlace(float* buf, size_t count) {
  if (size_ == 1) return;
  Check(comm_->Allreduce(buf, buf, count, comm::DType::kF32, comm::ReduceOp::kMax));
}

void TpContext::CopyFromOwner(float* buf, size_t count) {
  if (size_ == 1) return;
  static_assert(sizeof(float) == sizeof(int32_t));
  // Two's-complement wrap-around cannot happen: all but one addend are zero.
  Check(comm_->Allreduce(buf, buf, count, comm::DType::kI32, comm::ReduceOp::kSum));
}

void TpContext::MinInPlace(int32_t* buf, size_t count) {
  if (size_ == 1) return;
  Check(comm_->Allreduce(buf, buf, count, comm::DType::kI32, comm::ReduceOp::kMin));
}

}  // namespace lockstep::parallel
