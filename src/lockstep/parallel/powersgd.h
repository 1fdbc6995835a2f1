// PowerSgd: rank-r gradient compression with error feedback and warm start (Vogels et al.,
// NeurIPS 2019; PyTorch's powerSGD_hook), over the data-parallel group.
//
// The gradient arrives as "slots": one per rank (default mode) or one per canonical shard the
// rank computes (--deterministic), each scaled so that the sum over every slot of every rank
// is the global-batch gradient. Every parameter of two or more dimensions, viewed as an
// n x m matrix M (n = its first dimension), whose factors are at most half its size
// (r (n + m) <= n m / 2), is compressed; the rest travel as they are:
//   M_k += e_k                         error feedback: what slot k's last approximation missed
//   P = sum_k M_k Q                    (n x r)  one reduction over every slot of every rank
//   P = orthonormal columns of P       (Gram-Schmidt)
//   Q = sum_k M_k^T P                  (m x r)  second reduction; kept: the next step's warm start
//   M ~ P Q^T                          the gradient applied
//   e_k = M_k - P Q^T / V              (V slots in the world: the errors sum to what was missed)
// Sent per matrix: (n + m) r numbers instead of n m. Default mode reduces with the backend's
// allreduce (the rank's slot sum); deterministic mode reduces every slot's product in the
// communicator's fixed tree, so each slot's arithmetic and every sum are the same whatever
// the world size: the trajectory does not depend on it (each canonical shard keeps its error).
// Q starts as a normal draw from (seed, matrix index), the same on every rank.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/result.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::parallel {

struct PowerSgdOptions {
  int rank = 4;
  uint64_t seed = 0;
  bool deterministic = false;
  int64_t total_slots = 1;  // V: slots in the world (deterministic: det_shards; else the dp size)
};

// Whether a parameter of `shape` (numel elements) is compressed at rank r: two or more
// dimensions and factors of at most half its size.
bool PowerSgdCompresses(const std::vector<int64_t>& shape, int64_t numel, int64_t rank);

// Numbers one slot sends a step at rank r for parameters of these shapes: the uncompressed
// elements, and the P and Q factors of the compressed ones (the planner's count).
struct PowerSgdVolume {
  int64_t plain = 0, p = 0, q = 0;
};
PowerSgdVolume PowerSgdVolumeOf(const std::vector<std::vector<int64_t>>& shapes, int64_t rank);

class PowerSgd {
 public:
  // `slots`: this rank's slots. InvalidArgument when no parameter can be compressed at this
  // rank (it would be larger than half of every matrix).
  static Result<std::unique_ptr<PowerSgd>> Create(std::shared_ptr<comm::Communicator> dp,
                                                  const nn::ParameterStore& params, int slots,
                                                  const PowerSgdOptions& options);

  // slots[k] (numel floats each, modified: error feedback is added) -> out (numel floats): the
  // compressed parameters' approximation and the others' exact sums.
  Status Reduce(float* const* slots, float* out);

  // Checkpointed state, laid out like the parameters: slot k's error (zero outside compressed
  // parameters), and Q (matrix i's values, transposed: r x m, at the start of parameter i's range).
  std::vector<float>& error(int k) { return errors_[static_cast<size_t>(k)]; }
  std::vector<float>& q() { return q_; }
  int compressed_params() const { return static_cast<int>(matrices_.size()); }

 private:
  struct Matrix {
    int64_t offset, n, m;
    int64_t p_at, q_at;  // into the packed P and Q buffers
  };
  PowerSgd(std::shared_ptr<comm::Communicator> dp, const PowerSgdOptions& o) : dp_(std::move(dp)), o_(o) {}
  // Sums `count` floats of every slot (slot k's at packed + k * count) over the world into out.
  Status SumSlots(const float* packed, int64_t count, float* out);

  std::shared_ptr<comm::Communicator> dp_;
  PowerSgdOptions o_;
  std::vector<Matrix> matrices_;
  std::vector<std::pair<int64_t, int64_t>> plain_;  // [begin, end) ranges sent as they are
  int64_t plain_numel_ = 0, p_numel_ = 0, q_numel_ = 0;
  std::vector<std::vector<float>> errors_;
  std::vector<float> q_;
  std::vector<float> packed_, summed_, p_, delta_;  // scratch
};

}  // namespace lockstep::parallel
