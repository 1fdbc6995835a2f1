#include "lockstep/nn/llama.h"

#include <algorithm>
#include <cstring>

#include "lockstep/nn/activation.h"
#include "lockstep/nn/attention.h"
#include "lockstep/nn/cross_entropy.h"
#include "lockstep/nn/shape_ops.h"
#include "lockstep/nn/tied_weight.h"
#include "lockstep/nn/token_sampler.h"
#include "lockstep/tensor/check.h"

namespace lockstep::nn {

Status ValidateLlamaConfig(const LlamaConfig& c) {
  auto bad = [](const char* key, int64_t v, const std::string& want) {
    return Status::InvalidArgument(std::string(key) + ": " + std::to_string(v) + " is invalid; " + want);
  };
  if (c.vocab < 1 || c.vocab > (int64_t{1} << 24)) return bad("model.vocab", c.vocab, "expected 1..16777216");
  if (c.vocab_pad < 1 || c.vocab_pad > (int64_t{1} << 16))
    return bad("model.vocab_pad", c.vocab_pad, "expected 1..65536");
  if (c.context < 1) return bad("model.context", c.context, "expected >= 1");
  if (c.layers < 1) return bad("model.layers", c.layers, "expected >= 1");
  if (c.heads < 1) return bad("model.heads", c.heads, "expected >= 1");
  if (c.width < 1) return bad("model.width", c.width, "expected >= 1");
  if (c.ffn_hidden < 1) return bad("model.ffn_hidden", c.ffn_hidden, "expected >= 1");
  if (c.kv_heads < 1 || c.heads % c.kv_heads != 0)
    return bad("model.kv_heads", c.kv_heads, "expected a divisor of model.heads = " + std::to_string(c.heads));
  if (c.head_dim < 0) return bad("model.head_dim", c.head_dim, "expected >= 1, or 0 for model.width / model.heads");
  if (c.head_dim == 0 && c.width % c.heads != 0)
    return Status::InvalidArgument("model.width: " + std::to_string(c.width) + " is not divisible by model.heads = " +
                                   std::to_string(c.heads) + " (or set model.head_dim)");
  if (c.head_size() % 2 != 0)
    return bad("model.head_dim", c.head_size(), "rotary embedding needs an even head dimension");
  if (!(c.rope_theta > 0)) return Status::InvalidArgument("model.rope_theta: must be > 0");
  if (!(c.norm_eps > 0)) return Status::InvalidArgument("model.norm_eps: must be > 0");
  const RopeScaling& r = c.rope_scaling;
  if (r.type != "none" && r.type != "llama3")
    return Status::InvalidArgument("model.rope_scaling: \"" + r.type +
                                   "\" is not implemented; expected \"none\" or \"llama3\"");
  if (r.type == "llama3" &&
      !(r.factor > 0 && r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor && r.original_context > 0))
    return Status::InvalidArgument(
        "model.rope_scaling = \"llama3\" needs rope_factor > 0, 0 < rope_low_freq_factor < rope_high_freq_factor "
        "and rope_original_context > 0");
  return Status::Ok();
}

int64_t LlamaParamCount(const LlamaConfig& c) {
  const int64_t C = c.width, D = c.head_size(), F = c.ffn_hidden, V = c.padded_vocab();
  const int64_t layer = 2 * C                                       // the two norms
                        + C * c.heads * D + 2 * C * c.kv_heads * D  // q, k, v
                        + c.heads * D * C                           // o
                        + 3 * C * F;                                // gate, up, down
  return V * C + c.layers * layer + C + (c.tie_embeddings ? 0 : V * C);
}

double LlamaTrainFlopsPerSample(const LlamaConfig& c) {
  const double C = static_cast<double>(c.width), T = static_cast<double>(c.context);
  const double D = static_cast<double>(c.head_size()), H = static_cast<double>(c.heads);
  const double KV = static_cast<double>(c.kv_heads), F = static_cast<double>(c.ffn_hidden);
  const double matmul = 2.0 * (C * H * D + 2.0 * C * KV * D + H * D * C + 3.0 * C * F);
  const double attention = 2.0 * (T + 1.0) * H * D;  // causal: (T+1)/2 keys on average, QK^T and AV
  const double head = 2.0 * C * static_cast<double>(c.padded_vocab());
  return 3.0 * T * (static_cast<double>(c.layers) * (matmul + attention) + head);
}

Status CheckLlamaLayout(const LlamaConfig& c, const SampleLayout& layout) {
  if (layout.seq == c.context && layout.vocab <= c.vocab) return Status::Ok();
  return Status::InvalidArgument("the llama model (model.context = " + std::to_string(c.context) +
                                 ", model.vocab = " + std::to_string(c.vocab) +
                                 ") trains on token windows of seq=" + std::to_string(c.context) +
                                 " with tokens below its vocabulary, but the data's samples hold " + layout.ToString());
}

void Llama::DeclareParameters() {
  const Status st = ValidateLlamaConfig(c_);
  LS_CHECK(st.ok()) << st.ToString();
  const LlamaConfig& c = c_;
  const int64_t C = c.width, D = c.head_size(), F = c.ffn_hidden;
  const Init w = Init::Normal(0.02f), none = Init::Zeros();
  const float eps = static_cast<float>(c.norm_eps);
  embed_ = Embedding(ps_, "embed_tokens", c.padded_vocab(), C, w);
  layers_.resize(c.layers);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l);
    Layer& L = layers_[l];
    L.input_norm = RmsNorm(ps_, p + ".input_layernorm", C, eps);
    L.q = Linear(ps_, p + ".self_attn.q_proj", C, c.heads * D, /*bias=*/false, w, none);
    L.k = Linear(ps_, p + ".self_attn.k_proj", C, c.kv_heads * D, false, w, none);
    L.v = Linear(ps_, p + ".self_attn.v_proj", C, c.kv_heads * D, false, w, none);
    L.o = Linear(ps_, p + ".self_attn.o_proj", c.heads * D, C, false, w, none);
    L.post_norm = RmsNorm(ps_, p + ".post_attention_layernorm", C, eps);
    L.gate = Linear(ps_, p + ".mlp.gate_proj", C, F, false, w, none);
    L.up = Linear(ps_, p + ".mlp.up_proj", C, F, false, w, none);
    L.down = Linear(ps_, p + ".mlp.down_proj", F, C, false, w, none);
  }
  norm_ = RmsNorm(ps_, "norm", C, eps);
  if (!c.tie_embeddings) head_ = Linear(ps_, "lm_head", C, c.padded_vocab(), false, w, none);
  rope_ = MakeRotaryTables(D, c.context, c.rope_theta, c.rope_scaling);
}

Llama::Llama(const LlamaConfig& c) : c_(c) {
  DeclareParameters();
  ps_.Finalize(c.init_seed);
  LS_CHECK(ps_.numel() == LlamaParamCount(c)) << "Llama parameter count " << ps_.numel();
}

Llama::Llama(const LlamaConfig& c, InferenceOnly) : c_(c) {
  DeclareParameters();
  ps_.AllocatePartial(/*params=*/true, /*grads=*/false);
  ps_.Initialize(c.init_seed);
}

Variable Llama::Logits(Tape& tape, const int32_t* tokens, int64_t batch, int64_t seq) {
  LS_CHECK(tokens != nullptr && batch >= 1 && seq >= 1 && seq <= c_.context)
      << "Llama: tokens [" << batch << ", " << seq << "] with context " << c_.context;
  tensor::Tensor ids = tape.NewBuffer({batch, seq}, tensor::DType::kI32);
  std::memcpy(ids.data<int32_t>(), tokens, static_cast<size_t>(batch * seq) * sizeof(int32_t));
  // Tied: the head's view of the embedding is taken before the lookup (tied_weight.h says why).
  Variable tied = c_.tie_embeddings ? TiedHeadWeight(tape, ps_.var(embed_.weight_index())) : Variable();
  Variable x = embed_.Forward(tape, ids);  // [B, T, C]
  for (const Layer& L : layers_) {
    Variable h = L.input_norm.Forward(tape, x);
    // Separate statements: the tape order must not depend on argument evaluation order.
    Variable q = L.q.Forward(tape, h);
    Variable k = L.k.Forward(tape, h);
    Variable v = L.v.Forward(tape, h);
    Variable packed = PackRotaryQkvForward(tape, q, k, v, c_.heads, c_.kv_heads, rope_);
    x = L.o.ForwardResidual(tape, AttentionForward(tape, packed, c_.heads), x);
    Variable h2 = L.post_norm.Forward(tape, x);
    Variable gate = L.gate.Forward(tape, h2);
    Variable up = L.up.Forward(tape, h2);
    x = L.down.ForwardResidual(tape, SwiGluForward(tape, gate, up), x);
  }
  Variable xf = norm_.Forward(tape, x);
  Variable logits = c_.tie_embeddings ? LinearForward(tape, xf, tied, Variable()) : head_.Forward(tape, xf);
  return ReshapeForward(tape, logits, {batch * seq, c_.padded_vocab()});
}

Variable Llama::Loss(Tape& tape, const ModelInput& in) {
  LS_CHECK(in.targets != nullptr) << "Llama::Loss without targets";
  Variable logits = Logits(tape, in.tokens, in.batch, in.seq);
  const int64_t n = in.batch * in.seq;
  tensor::Tensor targets = tape.NewBuffer({n}, tensor::DType::kI32);
  std::memcpy(targets.data<int32_t>(), in.targets, static_cast<size_t>(n) * sizeof(int32_t));
  return SoftmaxCrossEntropyForward(tape, logits, targets, c_.vocab);
}

EvalResult Llama::Evaluate(const ModelInput& in) {
  LS_CHECK(in.targets != nullptr) << "Llama::Evaluate without targets";
  EvalResult r;
  {
    Tape::NoGradGuard no_grad(eval_tape_);
    Variable logits = Logits(eval_tape_, in.tokens, in.batch, in.seq);
    CrossEntropyStats s =
        SoftmaxCrossEntropyStats(logits.data(), in.targets, in.batch * in.seq, c_.padded_vocab(), c_.vocab);
    r = {s.loss_sum, s.count, s.correct};
  }
  eval_tape_.Clear();
  return r;
}

std::vector<int32_t> Llama::GenerateTokens(const std::vector<int32_t>& prompt, int n_tokens, float temperature,
                                           uint64_t seed, int top_k) {
  LS_CHECK(!prompt.empty()) << "Llama::GenerateTokens: empty prompt";
  std::vector<int32_t> ctx = prompt;
  TokenSampler sampler(c_.vocab, temperature, top_k, seed);
  std::vector<int32_t> out;
  for (int i = 0; i < n_tokens; ++i) {
    const int64_t seq = std::min<int64_t>(static_cast<int64_t>(ctx.size()), c_.context);
    int32_t next = 0;
    {
      Tape::NoGradGuard no_grad(eval_tape_);
      Variable logits = Logits(eval_tape_, ctx.data() + ctx.size() - seq, 1, seq);
      next = sampler.Next(logits.data() + (seq - 1) * c_.padded_vocab());
    }
    eval_tape_.Clear();
    ctx.push_back(next);
    out.push_back(next);
  }
  return out;
}

}  // namespace lockstep::nn
