// TpContext: one rank's view of its tensor-parallel group, and the canonical slicing that
// keeps deterministic training bit-identical whatever the tensor-parallel degree.
//
// Megatron splits a layer across tp ranks; the partial sums of a row-parallel layer (and the
// input gradient of a column-parallel one) are then added by an allreduce, whose grouping
// depends on tp, so the bits do too. Here every split dimension is cut into S canonical
// slices (S = `slices`; in deterministic mode train.det_tp_slices, otherwise S = tp) and rank t
// computes slices [t*S/tp, (t+1)*S/tp), each as its own GEMM of the same shape whatever tp is.
// Partial results of the S slices are summed over one fixed binary tree over slice index
// (Communicator::DeterministicAllreduceF32 with V = S), so tp = 1, 2 and 4 perform the very
// same floating-point operations. Outside deterministic mode S = tp: one slice per rank, one
// plain allreduce, exactly Megatron.
//
// Autograd closures cannot return a Status, so collectives issued inside them record their
// first error here; the trainer checks status() after each forward and backward.
// Used by one rank thread.
#pragma once

#include <cstddef>
#include <memory>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/status.h"

namespace lockstep::parallel {

class TpContext {
 public:
  // comm: the tensor-parallel group (size 1 for none). slices % comm->size() == 0.
  TpContext(std::shared_ptr<comm::Communicator> comm, int slices, bool deterministic);

  int size() const { return size_; }
  int rank() const { return rank_; }
  int slices() const { return slices_; }
  int local_slices() const { return slices_ / size_; }
  int first_slice() const { return rank_ * local_slices(); }
  bool deterministic() const { return deterministic_; }
  // Plain single-rank path (no tensor parallelism, no canonical slicing): the layers are
  // ordinary nn layers, bit-identical to nn::Gpt.
  bool plain() const { return size_ == 1 && !deterministic_; }

  // out (count floats) = sum over all S slices of `partials` (this rank's local_slices()
  // partials of count floats each, consecutive), the same on every tp rank.
  void SumSlices(const float* partials, float* out, size_t count);
  // Elementwise max over the tp ranks, in place (exact).
  void MaxInPlace(float* buf, size_t count);
  // Elementwise over the tp ranks, in place: every element is non-zero on at most one rank
  // (vocabulary-parallel lookups), and the integer sum of the bit patterns copies that
  // rank's value exactly (-0.0 and NaN payloads included), which a float sum would not.
  void CopyFromOwner(float* buf, size_t count);
  // Integer min over the tp ranks, in place.
  void MinInPlace(int32_t* buf, size_t count);

  const Status& status() const { return status_; }
  comm::Communicator& comm() { return *comm_; }
  // The group, for a second context over it with other slices (LlamaShard's key/value heads).
  std::shared_ptr<comm::Communicator> shared_comm() const { return comm_; }

 private:
  void Check(const comm::WorkHandle& work);

  std::shared_ptr<comm::Communicator> comm_;
  int size_, rank_, slices_;
  bool deterministic_;
  Status status_;
};

}  // namespace lockstep::parallel
