// LlamaShard: nn/llama.h's Llama as one rank's part under tensor and pipeline parallelism,
// GptShard's twin. It holds the layers [first_layer, end_layer) of its pipeline stage (plus
// embed_tokens on the first stage, the final norm and head on the last), each split over the
// tensor-parallel group the Megatron way:
//
//   embed_tokens, lm_head   vocabulary-parallel rows (+ the vocabulary-parallel loss)
//   q_proj                  column-parallel by query heads
//   k_proj, v_proj          column-parallel by key/value heads (below)
//   o_proj, down_proj       row-parallel (input columns split)
//   gate_proj, up_proj      column-parallel by SwiGLU width
//   the RMSNorm weights     replicated
//
// Grouped-query attention over S canonical slices (TpContext): query slice j holds heads
// [j H/S, (j+1) H/S). Key/value heads are cut into Skv = min(S, kv_heads) slices of their own
// (a second TpContext over the same group), so a rank holds whole kv slices and query slice j
// reads kv slice j Skv / S: with S <= kv_heads each query slice has its own kv heads, with
// S > kv_heads the S/kv_heads query slices of a kv head share one k and v product, computed
// once on the rank that holds them all. tp must therefore divide Skv (kv_heads split, never
// replicated: a tp degree above kv_heads is refused with one line).
//
// Parameter names, registration order and initial values are nn::Llama's (a value is a
// function of seed, name and global element index), so every layout starts from the same
// weights. With tp = 1, one stage and no determinism the shard runs nn::Llama's ops in
// nn::Llama's order (the same bits); deterministic mode computes over the canonical slices,
// the same bits at every tp degree. Tied embeddings over a pipeline: as GptShard.
#pragma once

#include <memory>
#include <vector>

#include "lockstep/nn/llama.h"
#include "lockstep/nn/rotary.h"
#include "lockstep/parallel/stage_model.h"
#include "lockstep/parallel/tp_context.h"

namespace lockstep::parallel {

struct LlamaShardOptions {
  nn::LlamaConfig model;
  int first_layer = 0;
  int end_layer = -1;  // -1: model.layers
  bool has_embedding = true;
  bool has_head = true;
  bool flat_params = true;  // as GptShardOptions (ZeRO-2/3 bind their own storage)
  bool flat_grads = true;
  // train.recompute = "block": each decoder layer keeps only its input for backward and runs
  // its forward again inside backward (autograd/recompute.h), as GptShardOptions::recompute.
  bool recompute = false;
};

// The key/value slices for `slices` query slices: min(slices, kv_heads).
int KvSlices(const nn::LlamaConfig& c, int slices);
// One line naming the key when the model cannot be cut into `slices` canonical slices over
// `tp` ranks (heads, kv heads, SwiGLU width, vocabulary); `by` names what sets the slices.
Status CheckLlamaSplits(const nn::LlamaConfig& c, int slices, int tp, const std::string& by);

class LlamaShard : public StageModel {
 public:
  // `tp` must outlive the shard.
  static Result<std::unique_ptr<LlamaShard>> Create(const LlamaShardOptions& options, TpContext* tp);

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
  std::string name() const override { return "llama"; }
  double TrainFlopsPerSample() const override { return nn::LlamaTrainFlopsPerSample(o_.model); }
  int TiedParam() const override { return tied_param_; }

 private:
  struct Layer {
    int input_norm, q, k, v, o, post_norm, gate, up, down;
  };
  LlamaShard(const LlamaShardOptions& options, TpContext* tp);
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
  autograd::Variable LayerForward(autograd::Tape& tape, const Layer& l, autograd::Variable x);
  std::vector<autograd::Variable> HeadLogits(autograd::Tape& tape, const autograd::Variable& x, int64_t rows);
  autograd::Variable Body(autograd::Tape& tape, const nn::ModelInput& in, const autograd::Variable& x);

  LlamaShardOptions o_;
  TpContext* tp_;
  std::unique_ptr<TpContext> kv_tp_;  // the key/value slices over the same group
  nn::ParameterStore ps_;
  std::vector<TensorPlacement> placements_;
  std::vector<ParamUnit> units_;
  UnitHooks* hooks_ = nullptr;
  int embed_ = -1, norm_ = -1, head_ = -1, tied_param_ = -1;
  std::vector<Layer> layers_;
  int64_t vocab_begin_ = 0;
  nn::RotaryTables rope_;
  autograd::Variable tied_head_;  // tied on this stage: embed_tokens as the head's weight
  autograd::Tape eval_tape_;
};

}  // namespace lockstep::parallel
