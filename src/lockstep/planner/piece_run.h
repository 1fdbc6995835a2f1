// What the profile's two probes share (compute_probe.cc, zero_probe.cc): a piece of the model
// run on a micro-batch with its memory counted and its passes timed (PieceRun), the synthetic
// micro-batch it runs on, and the ZeRO measurement the compute probe also runs on its workers.
// Internal to the planner: the public side is profile.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "lockstep/autograd/tape.h"
#include "lockstep/comm/communicator.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/parallel/gpt_shard.h"
#include "lockstep/parallel/stage_model.h"
#include "lockstep/planner/profile.h"
#include "lockstep/tensor/bf16_ops.h"
#include "lockstep/tensor/memory.h"

namespace lockstep::planner::probe {

double Median(std::vector<double> v);

// CPU time of the calling thread, in milliseconds.
double ThreadCpuMs();

// Inputs of one micro-batch: token ids, targets, images and labels from a fixed sequence.
struct Batch {
  std::vector<int32_t> tokens, targets, labels;
  std::vector<float> images;
  nn::ModelInput in;
};
Batch MakeBatch(int64_t rows, int64_t seq, int64_t vocab, int64_t image_floats);
// A batch of `rows` for a whole model built from `config`: token windows for a Llama, images
// (28 x 28) for the CNN.
Result<Batch> WholeModelBatch(const Config& config, int64_t rows);

// The GPT's pieces as stage models: 0 the embeddings, 1 one transformer block, 2 the head.
parallel::GptShardOptions PieceOptions(const nn::GptConfig& c, int piece);

// More single-threaded workers than cores: the share of a core each gets while all compute
// (PieceRun::Cost). 1 when every worker has a core, or runs several threads.
double Oversubscription(int workers, int threads_per_worker);

// One piece (a stage model) and its micro-batch: the first pass, on a fresh tape, gives its
// memory (what the forward leaves for the backward, the most it holds at once, and an
// evaluation pass without gradients); later passes are timed. The piece's input activation and
// the gradient arriving at its output belong to the neighbouring pieces, allocated before
// counting starts.
class PieceRun {
 public:
  PieceRun(parallel::StageModel* m, const nn::ModelInput* in) : m_(m), in_(in) {}

  // train.precision = bf16, as the trainer runs it: products in bf16 from the weights' bf16
  // copy (refreshed once, as after an optimizer step).
  parallel::StageModel* model() const { return m_; }
  void UseBf16();

  // A timed forward whose activations are released at once, as recompute's forward runs
  // (PieceCost::recompute_fwd_ms), right after the piece's own pass.
  void ReleasedForward();

  // `warm`: a timed pass run right after this piece's own previous pass (PieceCost::warm_fwd_ms).
  void Pass(tensor::MemoryTracker& mem, bool first_pass, bool warm = false);

  // The median pass, as `train` reports the median step. `oversubscribed` > 1: more worker
  // threads than cores (MeasureOnWorker); then the piece's CPU time times that factor.
  PieceCost Cost(double oversubscribed) const;

 private:
  void MeasureEvaluation(tensor::MemoryTracker& mem);

  // A received activation's stand-in on this piece's tape (none for the first stage).
  autograd::Variable StandInInput();

  parallel::StageModel* m_;
  const nn::ModelInput* in_;
  bool bf16_ = false;
  tensor::Bf16WeightCopy weights_;
  autograd::Tape tape_;
  // Timed passes: wall and this thread's CPU milliseconds.
  struct Times {
    std::vector<double> fwd, bwd, fwd_cpu, bwd_cpu;
    double FwdMs(double oversubscribed) const {
      return oversubscribed > 1 ? Median(fwd_cpu) * oversubscribed : Median(fwd);
    }
    double BwdMs(double oversubscribed) const {
      return oversubscribed > 1 ? Median(bwd_cpu) * oversubscribed : Median(bwd);
    }
  };
  PieceCost cost_;
  Times cold_, warm_, released_;
};

// What ZeRO stages 2 and 3 add to a piece in a step on this machine, in ns per micro-batch and
// parameter element (zero_probe.cc): the piece (a GPT block, or a whole model) built as each
// stage builds it, one unit over `dp`, against the plain piece (`plain`) in the same loop.
// `micros` passes make a step (1 in the profile; kZeroOverlapMicros for the overlap figure), and
// the figure is per micro-batch. `plain_ms`: the plain passes' median, per micro-batch.
Status MeasureZero(const ProfileRequest& req, const nn::ModelInput* in, parallel::TpContext* tp,
                   std::shared_ptr<comm::Communicator> dp, tensor::MemoryTracker& mem, PieceRun& plain,
                   double (&out)[2], int micros = 1, double* plain_ms = nullptr);

// Replaces each shape's ZeRO figure by the median over the shapes measured together
// (zero_probe.cc).
void PoolZeroCosts(const std::vector<int64_t>& rows, const std::function<PieceCost*(int64_t)>& piece);

}  // namespace lockstep::planner::probe
