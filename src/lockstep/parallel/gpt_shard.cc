#include "lockstep/parallel/gpt_shard.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "lockstep/autograd/recompute.h"
#include "lockstep/nn/activation.h"
#include "lockstep/nn/attention.h"
#include "lockstep/nn/embedding.h"
#include "lockstep/nn/layer_norm.h"
#include "lockstep/nn/shape_ops.h"
#include "lockstep/nn/tied_weight.h"
#include "lockstep/parallel/tp_linear.h"
#include "lockstep/parallel/tp_vocab.h"

namespace lockstep::parallel {

using autograd::Tape;
using autograd::Variable;
using nn::Init;

namespace {

Status Divides(const char* what, int64_t value, int slices, bool deterministic) {
  if (value % slices == 0) return Status::Ok();
  const std::string by = deterministic ? "train.det_tp_slices = " + std::to_string(slices)
                                       : "the tensor-parallel degree tp = " + std::to_string(slices);
  return Status::InvalidArgument(std::string(what) + " = " + std::to_string(value) + " is not divisible by " + by);
}

}  // namespace

Result<std::unique_ptr<GptShard>> GptShard::Create(const GptShardOptions& options, TpContext* tp) {
  LS_RETURN_IF_ERROR(nn::ValidateGptConfig(options.model));
  const nn::GptConfig& c = options.model;
  const int s = tp->slices();
  const bool det = tp->deterministic();
  LS_RETURN_IF_ERROR(Divides("model.heads", c.heads, s, det));
  LS_RETURN_IF_ERROR(
      Divides(c.vocab_pad > 1 ? "the padded vocabulary (model.vocab_pad)" : "model.vocab", c.padded_vocab(), s, det));
  LS_RETURN_IF_ERROR(Divides("model.mlp_ratio * model.width", c.mlp_ratio * c.width, s, det));
  GptShardOptions o = options;
  if (o.end_layer < 0) o.end_layer = static_cast<int>(c.layers);
  if (o.first_layer < 0 || o.first_layer > o.end_layer || o.end_layer > c.layers)
    return Status::InvalidArgument("GptShard: layers [" + std::to_string(o.first_layer) + ", " +
                                   std::to_string(o.end_layer) + ") outside the model's " + std::to_string(c.layers));
  return std::unique_ptr<GptShard>(new GptShard(o, tp));
}

int GptShard::Add(TensorPlacement placement, Init init, bool decay) {
  const int i = ps_.Add(placement.name, placement.local_shape(), init, decay);
  placements_.push_back(std::move(placement));
  return i;
}

GptShard::GptShard(const GptShardOptions& options, TpContext* tp) : o_(options), tp_(tp) {
  const nn::GptConfig& c = o_.model;
  const int64_t C = c.width, H = c.mlp_ratio * c.width, V = c.padded_vocab();
  const int k = tp->size(), t = tp->rank();
  const int64_t Cl = C / k, Hl = H / k, Vl = V / k;
  const float std = 0.02f, proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(c.layers));
  const bool split = k > 1;
  vocab_begin_ = t * Vl;
  // Row blocks for column-parallel tensors, column blocks for row-parallel ones; whole
  // tensors when there is no split (placements then cover everything, flagged replicated).
  auto rows = [&](const std::string& n, tensor::Shape shape, std::vector<std::pair<int64_t, int64_t>> r) {
    return split ? TensorPlacement::Rows(n, std::move(shape), std::move(r))
                 : TensorPlacement::Whole(n, std::move(shape));
  };
  auto cols = [&](const std::string& n, tensor::Shape shape, int64_t b, int64_t e) {
    return split ? TensorPlacement::Cols(n, std::move(shape), b, e) : TensorPlacement::Whole(n, std::move(shape));
  };
  auto whole = [](const std::string& n, tensor::Shape shape) { return TensorPlacement::Whole(n, std::move(shape)); };
  if (o_.has_embedding) {
    const int first = ps_.size();
    wte_ = Add(rows("wte.weight", {V, C}, {{t * Vl, (t + 1) * Vl}}), Init::Normal(std), true);
    wpe_ = Add(whole("wpe.weight", {c.context, C}), Init::Normal(std), true);
    units_.push_back({first, ps_.size()});
  }
  const std::vector<std::pair<int64_t, int64_t>> qkv_rows = {
      {t * Cl, (t + 1) * Cl}, {C + t * Cl, C + (t + 1) * Cl}, {2 * C + t * Cl, 2 * C + (t + 1) * Cl}};
  for (int l = o_.first_layer; l < o_.end_layer; ++l) {
    const std::string p = "blocks." + std::to_string(l);
    const int first = ps_.size();
    Block b;
    b.ln1_w = Add(whole(p + ".ln1.weight", {C}), Init::Ones(), false);
    b.ln1_b = Add(whole(p + ".ln1.bias", {C}), Init::Zeros(), false);
    b.qkv_w = Add(rows(p + ".qkv.weight", {3 * C, C}, qkv_rows), Init::Normal(std), true);
    b.qkv_b = Add(rows(p + ".qkv.bias", {3 * C}, qkv_rows), Init::Zeros(), false);
    b.proj_w = Add(cols(p + ".proj.weight", {C, C}, t * Cl, (t + 1) * Cl), Init::Normal(proj_std), true);
    b.proj_b = Add(whole(p + ".proj.bias", {C}), Init::Zeros(), false);
    b.ln2_w = Add(whole(p + ".ln2.weight", {C}), Init::Ones(), false);
    b.ln2_b = Add(whole(p + ".ln2.bias", {C}), Init::Zeros(), false);
    b.fc_w = Add(rows(p + ".fc.weight", {H, C}, {{t * Hl, (t + 1) * Hl}}), Init::Normal(std), true);
    b.fc_b = Add(rows(p + ".fc.bias", {H}, {{t * Hl, (t + 1) * Hl}}), Init::Zeros(), false);
    b.fc2_w = Add(cols(p + ".fc2.weight", {C, H}, t * Hl, (t + 1) * Hl), Init::Normal(proj_std), true);
    b.fc2_b = Add(whole(p + ".fc2.bias", {C}), Init::Zeros(), false);
    blocks_.push_back(b);
    units_.push_back({first, ps_.size()});
  }
  if (o_.has_head) {
    const int first = ps_.size();
    lnf_w_ = Add(whole("lnf.weight", {C}), Init::Ones(), false);
    lnf_b_ = Add(whole("lnf.bias", {C}), Init::Zeros(), false);
    if (!c.tie_embeddings) {
      head_ = Add(rows("head.weight", {V, C}, {{t * Vl, (t + 1) * Vl}}), Init::Normal(std), true);
    } else if (!o_.has_embedding) {
      // Tied over a pipeline: the last stage keeps its own copy of wte (the same rows, the
      // same initial values), kept equal to the first stage's by summing their gradients.
      TensorPlacement copy = rows("wte.weight", {V, C}, {{t * Vl, (t + 1) * Vl}});
      copy.tied_copy = true;
      head_ = Add(std::move(copy), Init::Normal(std), true);
    }
    units_.push_back({first, ps_.size()});
  }
  ps_.AllocatePartial(o_.flat_params, o_.flat_grads);
  if (o_.flat_params) InitValues(c.init_seed);
}

int GptShard::TiedParam() const {
  if (!o_.model.tie_embeddings || o_.has_embedding == o_.has_head) return -1;
  return o_.has_embedding ? wte_ : head_;
}

// Each local run takes the values the whole tensor has at those global elements.
void GptShard::InitValues(uint64_t seed) {
  for (int i = 0; i < ps_.size(); ++i) {
    const nn::ParamInfo& p = ps_.info(i);
    for (const ElementRun& r : placements_[i].Runs())
      nn::InitValues(ps_.flat_params() + p.offset + r.local, r.count, p.init, p.name, seed, r.global);
  }
}

Variable GptShard::Embed(Tape& tape, const nn::ModelInput& in) {
  const int64_t n = in.batch * in.seq;
  tensor::Tensor ids = tape.NewBuffer({in.batch, in.seq}, tensor::DType::kI32);
  std::memcpy(ids.data<int32_t>(), in.tokens, static_cast<size_t>(n) * sizeof(int32_t));
  tensor::Tensor pos = tape.NewBuffer({in.batch, in.seq}, tensor::DType::kI32);
  int32_t* p = pos.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(i % in.seq);
  // Tied on this stage: the head's view of wte is taken before the lookup (nn/tied_weight.h).
  if (o_.model.tie_embeddings && o_.has_head) tied_head_ = nn::TiedHeadWeight(tape, P(wte_));
  // Separate statements: the tape order must not depend on argument evaluation order.
  Variable tok = VocabParallelEmbedding(tape, *tp_, ids, P(wte_), vocab_begin_, o_.model.vocab);
  Variable position = nn::EmbeddingForward(tape, pos, P(wpe_));
  return nn::AddForward(tape, tok, position);
}

Variable GptShard::BlockForward(Tape& tape, const Block& b, Variable x) {
  const int64_t heads = o_.model.heads / tp_->slices();  // per canonical slice
  Variable h = nn::LayerNormForward(tape, x, P(b.ln1_w), P(b.ln1_b));
  std::vector<Variable> qkv = ColumnParallelLinear(tape, *tp_, h, P(b.qkv_w), P(b.qkv_b), 3);
  std::vector<Variable> att;
  for (const Variable& q : qkv) att.push_back(nn::AttentionForward(tape, q, heads));
  x = RowParallelLinearResidual(tape, *tp_, att, P(b.proj_w), P(b.proj_b), x);
  Variable h2 = nn::LayerNormForward(tape, x, P(b.ln2_w), P(b.ln2_b));
  std::vector<Variable> act = ColumnParallelLinear(tape, *tp_, h2, P(b.fc_w), P(b.fc_b), 1, /*gelu=*/true);
  return RowParallelLinearResidual(tape, *tp_, act, P(b.fc2_w), P(b.fc2_b), x);
}

std::vector<Variable> GptShard::HeadLogits(Tape& tape, const Variable& x, int64_t rows) {
  Variable hf = nn::LayerNormForward(tape, x, P(lnf_w_), P(lnf_b_));
  Variable w = head_ >= 0 ? P(head_) : std::exchange(tied_head_, Variable());
  std::vector<Variable> logits = ColumnParallelLinear(tape, *tp_, hf, w, Variable(), 1);
  for (Variable& l : logits) l = nn::ReshapeForward(tape, l, {rows, l.shape().back()});
  return logits;
}

Variable GptShard::Body(Tape& tape, const nn::ModelInput& in, const Variable& x_in) {
  int unit = 0;
  Variable x = x_in;
  if (o_.has_embedding) {
    Enter(tape, unit);
    x = Embed(tape, in);
    Exit(tape, unit++);
  }
  for (const Block& b : blocks_) {
    Enter(tape, unit);
    if (o_.recompute) {
      const std::vector<int> ids = {b.ln1_w, b.ln1_b, b.qkv_w, b.qkv_b, b.proj_w, b.proj_b,
                                    b.ln2_w, b.ln2_b, b.fc_w,  b.fc_b,  b.fc2_w,  b.fc2_b};
      std::vector<Variable> params;
      for (int i : ids) params.push_back(P(i));
      x = autograd::Recompute(tape, x, params,
                              [this, &b](Tape& t, const Variable& in) { return BlockForward(t, b, in); });
    } else {
      x = BlockForward(tape, b, x);
    }
    Exit(tape, unit++);
  }
  return x;
}

Variable GptShard::Forward(Tape& tape, const nn::ModelInput& in, const Variable& x_in) {
  LS_CHECK(o_.has_embedding || x_in.defined()) << "GptShard: a later stage needs the previous activation";
  LS_CHECK(in.batch >= 1 && in.seq >= 1 && in.seq <= o_.model.context)
      << "GptShard: batch " << in.batch << " x " << in.seq;
  tape.DeclareParams(ps_.size());
  Variable x = Body(tape, in, x_in);
  if (!o_.has_head) return x;
  LS_CHECK(in.targets != nullptr) << "GptShard::Forward without targets";
  const int unit = static_cast<int>(units_.size()) - 1;
  Enter(tape, unit);
  const int64_t n = in.batch * in.seq;
  std::vector<Variable> logits = HeadLogits(tape, x, n);
  tensor::Tensor targets = tape.NewBuffer({n}, tensor::DType::kI32);
  std::memcpy(targets.data<int32_t>(), in.targets, static_cast<size_t>(n) * sizeof(int32_t));
  Variable loss = VocabParallelCrossEntropy(tape, *tp_, logits, targets, vocab_begin_, o_.model.vocab);
  Exit(tape, unit);
  return loss;
}

nn::EvalResult GptShard::Evaluate(const nn::ModelInput& in, const float* x_raw, float* out) {
  nn::EvalResult r;
  {
    Tape::NoGradGuard no_grad(eval_tape_);
    Variable x;
    if (!o_.has_embedding) {
      tensor::Tensor t = eval_tape_.NewBuffer(ActivationShape(in));
      std::memcpy(t.data<float>(), x_raw, static_cast<size_t>(t.numel()) * sizeof(float));
      x = Variable::Constant(t);
    }
    x = Body(eval_tape_, in, x);
    if (!o_.has_head) {
      std::memcpy(out, x.data(), static_cast<size_t>(x.numel()) * sizeof(float));
    } else {
      const int unit = static_cast<int>(units_.size()) - 1;
      Enter(eval_tape_, unit);
      const int64_t n = in.batch * in.seq;
      std::vector<Variable> logits = HeadLogits(eval_tape_, x, n);
      std::vector<const float*> raw;
      for (const Variable& l : logits) raw.push_back(l.data());
      r = VocabParallelCrossEntropyStats(*tp_, raw, n, logits[0].shape().back(), in.targets, vocab_begin_,
                                         o_.model.vocab);
      Exit(eval_tape_, unit);
    }
  }
  eval_tape_.Clear();
  return r;
}

}  // namespace lockstep::parallel
