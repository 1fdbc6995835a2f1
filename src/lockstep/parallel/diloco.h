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
// With overlap_steps = tau > 0 (Streaming DiLoCo's overlapping communication), the exchange
// of a fragment due after step s starts then and is waited for after step s + tau: the
// replica trains on meanwhile, and its fragment becomes
//   params = alpha * params + (1 - alpha) * anchor        (alpha = merge_alpha; 0: the anchor)
// The deltas in flight are state: checkpoints keep each replica's (pending()), and a resumed
// run starts their exchanges again (Relaunch), so it ends with the uninterrupted run's bits.
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
  int64_t overlap_steps = 0;  // tau: inner steps an exchange runs beside (0: it blocks its step)
  double merge_alpha = 0;     // overlap: the weight of the replica's own parameters in the merge
};

class DilocoSync {
 public:
  // `params`: the rank's parameter store (its flat buffer, which replicas share in layout).
  // InvalidArgument when F exceeds the number of parameters, H < 1 or tau is not in [0, H).
  static Result<std::unique_ptr<DilocoSync>> Create(std::shared_ptr<comm::Communicator> dp,
                                                    const nn::ParameterStore& params, const DilocoOptions& options);

  // After the inner update of step `step` (0-based): finishes the exchanges due now, then
  // synchronises (or, overlapping, starts the exchange of) the fragments due; `last`: every
  // exchange is finished and every fragment synchronised, so the replicas end as one model.
  // Returns how many fragments changed the parameters. A non-finite averaged outer gradient is
  // NonFinite, before that fragment changed.
  Result<int> AfterStep(int64_t step, bool last, float* params);

  // A resumed run whose next step is `next_step`: starts again the exchanges that were in
  // flight when its checkpoint was taken, from the deltas pending() held (no-op without overlap).
  Status Relaunch(int64_t next_step);

  // The anchor becomes `params` and the momentum zero (the start of a run).
  void Reset(const float* params);

  bool Due(int fragment, int64_t step) const;
  int fragments() const { return static_cast<int>(begin_.size()) - 1; }
  // Fragment f covers flat elements [fragment_begin(f), fragment_begin(f + 1)).
  int64_t fragment_begin(int f) const { return begin_[static_cast<size_t>(f)]; }
  std::vector<float>& anchor() { return anchor_; }
  std::vector<float>& momentum() { return momentum_; }
  bool overlapping() const { return o_.overlap_steps > 0; }
  // Each fragment's delta as sent (bf16: rounded), over the whole flat buffer; only the
  // fragments in flight mean anything (overlap: they are checkpointed; blocking, the sum
  // replaces the delta in place). Differs per replica.
  std::vector<float>& pending() { return pending_; }

 private:
  struct InFlight {
    int fragment = 0;
    int64_t finish_step = 0;  // waited for after this step
    comm::WorkHandle work;    // null: one replica, nothing sent
  };
  DilocoSync(std::shared_ptr<comm::Communicator> dp, const DilocoOptions& o) : dp_(std::move(dp)), o_(o) {}
  int64_t lo(int f) const { return begin_[static_cast<size_t>(f)]; }
  int64_t hi(int f) const { return begin_[static_cast<size_t>(f) + 1]; }
  // pending_ of fragment f = anchor - params (bf16: rounded as it will travel).
  void TakeDelta(int f, const float* params);
  // Starts the sum of fragment f's pending_ over the replicas into received_.
  void StartExchange(int f, int64_t finish_step);
  // Waits for `e`, then the outer step on the averaged delta; the fragment becomes the anchor,
  // or alpha * params + (1 - alpha) * anchor.
  Status Finish(const InFlight& e, double alpha, float* params);

  std::shared_ptr<comm::Communicator> dp_;
  DilocoOptions o_;
  std::vector<int64_t> begin_;  // F + 1 fragment boundaries
  std::vector<float> anchor_, momentum_;
  std::vector<float> pending_, received_;  // sent and summed deltas, the whole flat buffer
  std::vector<uint16_t> wire_out_, wire_in_;  // the same as bf16 on the wire
  std::vector<InFlight> in_flight_;           // in the order they started
};

// The first parameter of each of F fragments of about equal elements, cut at parameter
// boundaries (flat order), plus the end: F + 1 offsets.
std::vector<int64_t> CutFragments(const nn::ParameterStore& params, int fragments);

}  // namespace lockstep::parallel
