// DilocoSync: the outer loop of DiLoCo (Douillard et al. 2023) and of its streaming form
// (Douillard et al. 2025), over the data-parallel group.
//
// Each dp replica trains alone (its own inner optimizer, no gradient allreduce). The flat
// parameter buffer is cut into F fragments at parameter boundaries (F = 1: plain DiLoCo).
// Fragment f is synchronised after the steps s with (s + 1 - offset_f) % H == 0, offsets
// staggered over the window (offset_f = (f + 1) * H / F), and after the run's last step, so a
// finished run holds one model:
//   outer gradient   delta = anchor - params                 (this replica's change)
//   average          delta = mean over replicas of delta     (allreduce; fp32 or bf16 on the wire)
//   outer Nesterov   buf = mu * buf + delta;  update = delta + mu * buf   (PyTorch's SGD, nesterov)
//   apply            anchor -= outer_lr * update;  params = anchor
// The anchor and the momentum are the same on every replica (they change only from the
// averaged delta), so checkpoints keep them once; the replicas' own parameters and inner
// optimizer states differ between synchronisations and are kept per replica (the trainer's).
//
// Deterministic mode averages with the fixed-tree sum (one contribution per replica): the same
// bits on every replica and in every run with the same number of replicas. The trajectory
// itself depends on that number (each replica's inner steps see its share of the batch).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/result.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::parallel {

struct DilocoOptions {
  int64_t inner_steps = 50;  // H
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  int fragments = 1;  // F
  bool bf16 = false;  // the outer gradient travels as bf16
  bool deterministic = false;
};

class DilocoSync {
 public:
  // `params`: the rank's parameter store (its flat buffer, which replicas share in layout).
  // InvalidArgument when F exceeds the number of parameters or H < 1.
  static Result<std::unique_ptr<DilocoSync>> Create(std::shared_ptr<comm::Communicator> dp,
                                                    const nn::ParameterStore& params, const DilocoOptions& options);

  // After the inner update of step `step` (0-based): synchronises the fragments due (all of
  // them when `last`). Returns how many fragments were synchronised. A non-finite averaged
  // outer gradient is NonFinite, before anything changed.
  Result<int> AfterStep(int64_t step, bool last, float* params);

  // The anchor becomes `params` and the momentum zero (the start of a run).
  void Reset(const float* params);

  bool Due(int fragment, int64_t step) const;
  int fragments() const { return static_cast<int>(begin_.size()) - 1; }
  // Fragment f covers flat elements [fragment_begin(f), fragment_begin(f + 1)).
  int64_t fragment_begin(int f) const { return begin_[static_cast<size_t>(f)]; }
  std::vector<float>& anchor() { return anchor_; }
  std::vector<float>& momentum() { return momentum_; }

 private:
  DilocoSync(std::shared_ptr<comm::Communicator> dp, const DilocoOptions& o) : dp_(std::move(dp)), o_(o) {}
  Status SyncFragment(int f, float* params);

  std::shared_ptr<comm::Communicator> dp_;
  DilocoOptions o_;
  std::vector<int64_t> begin_;  // F + 1 fragment boundaries
  std::vector<float> anchor_, momentum_, delta_;
  std::vector<uint16_t> wire_;  // bf16 on the wire
};

// The first parameter of each of F fragments of about equal elements, cut at parameter
// boundaries (flat order), plus the end: F + 1 offsets.
std::vector<int64_t> CutFragments(const nn::ParameterStore& params, int fragments);

}  // namespace lockstep::parallel
