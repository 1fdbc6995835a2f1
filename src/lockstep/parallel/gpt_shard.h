// GptShard: the byte-level GPT of nn/gpt.h as one rank's part under tensor and pipeline
// parallelism. It holds the blocks [first_layer, end_layer) of its pipeline stage (plus the
// embeddings on the first stage, the final LayerNorm and head on the last), each split over
// the tensor-parallel group of `tp` the Megatron way:
//
//   wte            vocabulary-parallel rows          wpe, ln*, proj.bias, fc2.bias  replicated
//   qkv            column-parallel (heads split: rows of q, k and v of the local heads)
//   proj, fc2      row-parallel (input columns split)
//   fc             column-parallel                   head  vocabulary-parallel rows + loss
//
// Tied embeddings (model.tie_embeddings): on a stage holding both, the head reads wte
// (nn/tied_weight.h); over a pipeline the last stage holds a copy of wte (a tied_copy
// placement) whose gradient the trainer sums with the first stage's (Trainer::SumTiedGradients, runtime/training/train_step.cc).
// model.vocab_pad: wte/head hold the padded vocabulary's rows, the loss sees model.vocab.
//
// Parameter names and registration order are nn::Gpt's, and initial values are a function of
// (seed, name, GLOBAL element index) through the placements, so every layout starts from the
// same weights. With tp = 1, one stage and no determinism, GptShard runs exactly nn::Gpt's
// ops in nn::Gpt's order (the same bits); in deterministic mode it computes over the
// canonical slices of TpContext, giving the same bits for every tp degree.
#pragma once

#include <memory>
#include <vector>

#include "lockstep/nn/gpt.h"
#include "lockstep/parallel/stage_model.h"
#include "lockstep/parallel/tp_context.h"

namespace lockstep::parallel {

struct GptShardOptions {
  nn::GptConfig model;
  int first_layer = 0;
  int end_layer = -1;  // -1: model.layers
  bool has_embedding = true;
  bool has_head = true;
  // ZeRO-2 builds without the flat gradient buffer, ZeRO-3 without either: the ZeRO state
  // binds (and initialises) what it owns instead (parallel/zero_units.h).
  bool flat_params = true;
  bool flat_grads = true;
  // train.recompute = "block": each block keeps only its input for backward and runs its
  // forward again inside backward (autograd/recompute.h).
  bool recompute = false;
};

class GptShard : public StageModel {
 public:
  // `tp` must outlive the shard. InvalidArgument (one line naming the key) when the model
  // cannot be split into tp->slices() slices (heads, MLP width, vocabulary).
  static Result<std::unique_ptr<GptShard>> Create(const GptShardOptions& options, TpContext* tp);

  nn::ParameterStore& params() override { return ps_; }
  const nn::ParameterStore& params() const override { return ps_; }
  const std::vector<TensorPlacement>& placements() const override { return placements_; }
  std::vector<ParamUnit> units() const override { return units_; }
  void set_unit_hooks(UnitHooks* hooks) override { hooks_ = hooks; }
  bool first_stage() const override { return o_.has_embedding; }
  bool last_stage() const override { return o_.has_head; }
  tensor::Shape ActivationShape(const nn::ModelInput& in) const override { return {in.batch, in.seq, o_.model.width}; }
  autograd::Variable Forward(autograd::Tape& tape, const nn::ModelInput& in, const autograd::Variable& x) override;
  nn::EvalResult Evaluate(const nn::ModelInput& in, const float* x, float* out) override;
  void set_eval_pool(autograd::BufferPool* pool) override { eval_tape_.BorrowPool(pool); }
  std::string name() const override { return "gpt"; }
  double TrainFlopsPerSample() const override { return nn::GptTrainFlopsPerSample(o_.model); }
  int TiedParam() const override;

 private:
  struct Block {
    int ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b;
  };
  GptShard(const GptShardOptions& options, TpContext* tp);
  int Add(TensorPlacement placement, nn::Init init, bool decay);
  void InitValues(uint64_t seed);
  const autograd::Variable& P(int i) const { return ps_.var(i); }
  void Enter(autograd::Tape& tape, int unit) {
    if (hooks_) hooks_->Enter(tape, unit);
  }
  void Exit(autograd::Tape& tape, int unit) {
    if (hooks_) hooks_->Exit(tape, unit);
  }

  autograd::Variable Embed(autograd::Tape& tape, const nn::ModelInput& in);
  autograd::Variable BlockForward(autograd::Tape& tape, const Block& b, autograd::Variable x);
  std::vector<autograd::Variable> HeadLogits(autograd::Tape& tape, const autograd::Variable& x, int64_t rows);
  autograd::Variable Body(autograd::Tape& tape, const nn::ModelInput& in, const autograd::Variable& x);

  GptShardOptions o_;
  TpContext* tp_;
  nn::ParameterStore ps_;
  std::vector<TensorPlacement> placements_;
  std::vector<ParamUnit> units_;
  UnitHooks* hooks_ = nullptr;
  int wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1, head_ = -1;
  std::vector<Block> blocks_;
  int64_t vocab_begin_ = 0;  // first vocabulary row of this rank's embedding / head
  // Tied with the head on this stage: wte as the head's weight, from Embed to HeadLogits.
  autograd::Variable tied_head_;
  autograd::Tape eval_tape_;
};

}  // namespace lockstep::parallel
