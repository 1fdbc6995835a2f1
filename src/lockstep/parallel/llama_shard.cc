#include "lockstep/parallel/llama_shard.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "lockstep/autograd/recompute.h"
#include "lockstep/nn/activation.h"
#include "lockstep/nn/attention.h"
#include "lockstep/nn/rms_norm.h"
#include "lockstep/nn/shape_ops.h"
#include "lockstep/nn/tied_weight.h"
#include "lockstep/parallel/tp_linear.h"
#include "lockstep/parallel/tp_vocab.h"

namespace lockstep::parallel {

using autograd::Tape;
using autograd::Variable;
using nn::Init;

int KvSlices(const nn::LlamaConfig& c, int slices) { return static_cast<int>(std::min<int64_t>(slices, c.kv_heads)); }

Status CheckLlamaSplits(const nn::LlamaConfig& c, int slices, int tp, const std::string& by) {
  auto check = [&](const std::string& what, int64_t v, int64_t s, const std::string& divisor) {
    return v % s == 0 ? Status::Ok()
                      : Status::InvalidArgument(what + " = " + std::to_string(v) + " is not divisible by " + divisor);
  };
  LS_RETURN_IF_ERROR(check("model.heads", c.heads, slices, by));
  LS_RETURN_IF_ERROR(check("model.ffn_hidden", c.ffn_hidden, slices, by));
  LS_RETURN_IF_ERROR(
      check(c.vocab_pad > 1 ? "the padded vocabulary (model.vocab_pad)" : "model.vocab", c.padded_vocab(), slices, by));
  // The key/value heads are split, never replicated: each rank holds whole kv slices.
  const int kv = KvSlices(c, slices);
  LS_RETURN_IF_ERROR(check("model.kv_heads", c.kv_heads, tp,
                           "the tensor-parallel degree tp = " + std::to_string(tp) +
                               " (key/value heads are split over the tp ranks, not replicated)"));
  if (slices % kv != 0 || c.kv_heads % kv != 0)
    return Status::InvalidArgument("model.kv_heads = " + std::to_string(c.kv_heads) + " and " + by +
                                   " do not nest (one must divide the other)");
  return Status::Ok();
}

Result<std::unique_ptr<LlamaShard>> LlamaShard::Create(const LlamaShardOptions& options, TpContext* tp) {
  LS_RETURN_IF_ERROR(nn::ValidateLlamaConfig(options.model));
  const std::string by = tp->deterministic() ? "train.det_tp_slices = " + std::to_string(tp->slices())
                                             : "the tensor-parallel degree tp = " + std::to_string(tp->slices());
  LS_RETURN_IF_ERROR(CheckLlamaSplits(options.model, tp->slices(), tp->size(), by));
  LlamaShardOptions o = options;
  const nn::LlamaConfig& c = o.model;
  if (o.end_layer < 0) o.end_layer = static_cast<int>(c.layers);
  if (o.first_layer < 0 || o.first_layer > o.end_layer || o.end_layer > c.layers)
    return Status::InvalidArgument("LlamaShard: layers [" + std::to_string(o.first_layer) + ", " +
                                   std::to_string(o.end_layer) + ") outside the model's " + std::to_string(c.layers));
  return std::unique_ptr<LlamaShard>(new LlamaShard(o, tp));
}

int LlamaShard::Add(TensorPlacement placement, Init init, bool decay) {
  const int i = ps_.Add(placement.name, placement.local_shape(), init, decay);
  placements_.push_back(std::move(placement));
  return i;
}

LlamaShard::LlamaShard(const LlamaShardOptions& options, TpContext* tp) : o_(options), tp_(tp) {
  const nn::LlamaConfig& c = o_.model;
  kv_tp_ = std::make_unique<TpContext>(tp->shared_comm(), KvSlices(c, tp->slices()), tp->deterministic());
  const int64_t C = c.width, D = c.head_size(), F = c.ffn_hidden, V = c.padded_vocab();
  const int k = tp->size(), t = tp->rank();
  const int64_t Ql = c.heads * D / k, KVl = c.kv_heads * D / k, Fl = F / k, Vl = V / k;
  const Init w = Init::Normal(0.02f);
  const bool split = k > 1;
  vocab_begin_ = t * Vl;
  auto rows = [&](const std::string& n, tensor::Shape shape, int64_t b, int64_t e) {
    return split ? TensorPlacement::Rows(n, std::move(shape), {{b, e}}) : TensorPlacement::Whole(n, std::move(shape));
  };
  auto cols = [&](const std::string& n, tensor::Shape shape, int64_t b, int64_t e) {
    return split ? TensorPlacement::Cols(n, std::move(shape), b, e) : TensorPlacement::Whole(n, std::move(shape));
  };
  auto whole = [](const std::string& n, tensor::Shape shape) { return TensorPlacement::Whole(n, std::move(shape)); };
  if (o_.has_embedding) {
    const int first = ps_.size();
    embed_ = Add(rows("embed_tokens.weight", {V, C}, t * Vl, (t + 1) * Vl), w, true);
    units_.push_back({first, ps_.size()});
  }
  for (int l = o_.first_layer; l < o_.end_layer; ++l) {
    const std::string p = "layers." + std::to_string(l);
    const int first = ps_.size();
    Layer L;
    L.input_norm = Add(whole(p + ".input_layernorm.weight", {C}), Init::Ones(), false);
    L.q = Add(rows(p + ".self_attn.q_proj.weight", {c.heads * D, C}, t * Ql, (t + 1) * Ql), w, true);
    L.k = Add(rows(p + ".self_attn.k_proj.weight", {c.kv_heads * D, C}, t * KVl, (t + 1) * KVl), w, true);
    L.v = Add(rows(p + ".self_attn.v_proj.weight", {c.kv_heads * D, C}, t * KVl, (t + 1) * KVl), w, true);
    L.o = Add(cols(p + ".self_attn.o_proj.weight", {C, c.heads * D}, t * Ql, (t + 1) * Ql), w, true);
    L.post_norm = Add(whole(p + ".post_attention_layernorm.weight", {C}), Init::Ones(), false);
    L.gate = Add(rows(p + ".mlp.gate_proj.weight", {F, C}, t * Fl, (t + 1) * Fl), w, true);
    L.up = Add(rows(p + ".mlp.up_proj.weight", {F, C}, t * Fl, (t + 1) * Fl), w, true);
    L.down = Add(cols(p + ".mlp.down_proj.weight", {C, F}, t * Fl, (t + 1) * Fl), w, true);
    layers_.push_back(L);
    units_.push_back({first, ps_.size()});
  }
  if (o_.has_head) {
    const int first = ps_.size();
    norm_ = Add(whole("norm.weight", {C}), Init::Ones(), false);
    if (!c.tie_embeddings) {
      head_ = Add(rows("lm_head.weight", {V, C}, t * Vl, (t + 1) * Vl), w, true);
    } else if (!o_.has_embedding) {
      // Tied over a pipeline: the last stage keeps its own copy of embed_tokens (as GptShard).
      TensorPlacement copy = rows("embed_tokens.weight", {V, C}, t * Vl, (t + 1) * Vl);
      copy.tied_copy = true;
      head_ = Add(std::move(copy), w, true);
      tied_param_ = head_;
    }
    units_.push_back({first, ps_.size()});
  }
  if (c.tie_embeddings && o_.has_embedding && !o_.has_head) tied_param_ = embed_;
  ps_.AllocatePartial(o_.flat_params, o_.flat_grads);
  if (o_.flat_params) InitValues(c.init_seed);
  rope_ = nn::MakeRotaryTables(D, c.context, c.rope_theta, c.rope_scaling);
}

void LlamaShard::InitValues(uint64_t seed) {
  for (int i = 0; i < ps_.size(); ++i) {
    const nn::ParamInfo& p = ps_.info(i);
    for (const ElementRun& r : placements_[i].Runs())
      nn::InitValues(ps_.flat_params() + p.offset + r.local, r.count, p.init, p.name, seed, r.global);
  }
}

Variable LlamaShard::Embed(Tape& tape, const nn::ModelInput& in) {
  tensor::Tensor ids = tape.NewBuffer({in.batch, in.seq}, tensor::DType::kI32);
  std::memcpy(ids.data<int32_t>(), in.tokens, static_cast<size_t>(in.batch * in.seq) * sizeof(int32_t));
  // Tied on this stage: the head's view of the embedding is taken before the lookup.
  if (o_.model.tie_embeddings && o_.has_head) tied_head_ = nn::TiedHeadWeight(tape, P(embed_));
  return VocabParallelEmbedding(tape, *tp_, ids, P(embed_), vocab_begin_, o_.model.vocab);
}

Variable LlamaShard::LayerForward(Tape& tape, const Layer& L, Variable x) {
  const nn::LlamaConfig& c = o_.model;
  const float eps = static_cast<float>(c.norm_eps);
  const int S = tp_->slices(), Skv = kv_tp_->slices();
  const int64_t heads = c.heads / S, kv_heads = c.kv_heads / Skv;  // per canonical slice
  Variable h = nn::RmsNormForward(tape, x, P(L.input_norm), eps);
  // Separate statements: the tape order must not depend on argument evaluation order.
  std::vector<Variable> q = ColumnParallelLinear(tape, *tp_, h, P(L.q), Variable(), 1);
  std::vector<Variable> k = ColumnParallelLinear(tape, *kv_tp_, h, P(L.k), Variable(), 1);
  std::vector<Variable> v = ColumnParallelLinear(tape, *kv_tp_, h, P(L.v), Variable(), 1);
  std::vector<Variable> att;
  for (size_t j = 0; j < q.size(); ++j) {
    // Query slice (global) J reads kv slice J * Skv / S; both counted from this rank's first.
    const int J = tp_->first_slice() + static_cast<int>(j);
    const size_t g = static_cast<size_t>(J * Skv / S - kv_tp_->first_slice());
    Variable packed = nn::PackRotaryQkvForward(tape, q[j], k[g], v[g], heads, kv_heads, rope_);
    att.push_back(nn::AttentionForward(tape, packed, heads));
  }
  x = RowParallelLinearResidual(tape, *tp_, att, P(L.o), Variable(), x);
  Variable h2 = nn::RmsNormForward(tape, x, P(L.post_norm), eps);
  std::vector<Variable> gate = ColumnParallelLinear(tape, *tp_, h2, P(L.gate), Variable(), 1);
  std::vector<Variable> up = ColumnParallelLinear(tape, *tp_, h2, P(L.up), Variable(), 1);
  std::vector<Variable> act;
  for (size_t j = 0; j < gate.size(); ++j) act.push_back(nn::SwiGluForward(tape, gate[j], up[j]));
  return RowParallelLinearResidual(tape, *tp_, act, P(L.down), Variable(), x);
}

std::vector<Variable> LlamaShard::HeadLogits(Tape& tape, const Variable& x, int64_t rows) {
  Variable xf = nn::RmsNormForward(tape, x, P(norm_), static_cast<float>(o_.model.norm_eps));
  Variable w = head_ >= 0 ? P(head_) : std::exchange(tied_head_, Variable());
  std::vector<Variable> logits = ColumnParallelLinear(tape, *tp_, xf, w, Variable(), 1);
  for (Variable& l : logits) l = nn::ReshapeForward(tape, l, {rows, l.shape().back()});
  return logits;
}

Variable LlamaShard::Body(Tape& tape, const nn::ModelInput& in, const Variable& x_in) {
  int unit = 0;
  Variable x = x_in;
  if (o_.has_embedding) {
    Enter(tape, unit);
    x = Embed(tape, in);
    Exit(tape, unit++);
  }
  for (const Layer& L : layers_) {
    Enter(tape, unit);
    if (o_.recompute) {
      std::vector<Variable> params;
      for (int i : {L.input_norm, L.q, L.k, L.v, L.o, L.post_norm, L.gate, L.up, L.down}) params.push_back(P(i));
      x = autograd::Recompute(tape, x, params,
                              [this, &L](Tape& t, const Variable& in) { return LayerForward(t, L, in); });
    } else {
      x = LayerForward(tape, L, x);
    }
    Exit(tape, unit++);
  }
  return x;
}

Variable LlamaShard::Forward(Tape& tape, const nn::ModelInput& in, const Variable& x_in) {
  LS_CHECK(o_.has_embedding || x_in.defined()) << "LlamaShard: a later stage needs the previous activation";
  LS_CHECK(in.batch >= 1 && in.seq >= 1 && in.seq <= o_.model.context)
      << "LlamaShard: batch " << in.batch << " x " << in.seq;
  tape.DeclareParams(ps_.size());
  Variable x = Body(tape, in, x_in);
  if (!o_.has_head) return x;
  LS_CHECK(in.targets != nullptr) << "LlamaShard::Forward without targets";
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

nn::EvalResult LlamaShard::Evaluate(const nn::ModelInput& in, const float* x_raw, float* out) {
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
