#include "lockstep/nn/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lockstep/nn/activation.h"
#include "lockstep/nn/cross_entropy.h"
#include "lockstep/nn/shape_ops.h"
#include "lockstep/nn/tied_weight.h"
#include "lockstep/nn/token_sampler.h"

namespace lockstep::nn {

Status CheckGptLayout(const GptConfig& c, const SampleLayout& layout) {
  if (layout.seq == c.context && layout.vocab <= c.vocab) return Status::Ok();
  return Status::InvalidArgument(
      "the gpt model (model.context = " + std::to_string(c.context) + ", model.vocab = " + std::to_string(c.vocab) +
      ") trains on token windows of seq=" + std::to_string(c.context) +
      " with tokens below its vocabulary, but the data's " + "samples hold " + layout.ToString());
}

using autograd::Tape;
using autograd::Variable;

Status ValidateGptConfig(const GptConfig& c) {
  auto bad = [](const char* key, int64_t v, const char* want) {
    return Status::InvalidArgument(std::string(key) + ": " + std::to_string(v) + " is invalid; " + want);
  };
  if (c.vocab < 1 || c.vocab > (int64_t{1} << 24)) {
    return bad("model.vocab", c.vocab, "expected 1..16777216");
  }
  if (c.vocab_pad < 1 || c.vocab_pad > (int64_t{1} << 16))
    return bad("model.vocab_pad", c.vocab_pad, "expected 1..65536");
  if (c.padded_vocab() > (int64_t{1} << 24)) {
    return bad("model.vocab_pad", c.vocab_pad, "the padded vocabulary must stay <= 16777216");
  }
  if (c.context < 1) return bad("model.context", c.context, "expected >= 1");
  if (c.layers < 1) return bad("model.layers", c.layers, "expected >= 1");
  if (c.heads < 1) return bad("model.heads", c.heads, "expected >= 1");
  if (c.width < 1) return bad("model.width", c.width, "expected >= 1");
  if (c.mlp_ratio < 1) return bad("model.mlp_ratio", c.mlp_ratio, "expected >= 1");
  if (c.width % c.heads != 0) {
    return Status::InvalidArgument("model.width: " + std::to_string(c.width) +
                                   " is not divisible by model.heads = " + std::to_string(c.heads));
  }
  return Status::Ok();
}

int64_t GptParamCount(const GptConfig& c) {
  const int64_t C = c.width, H = c.mlp_ratio * C;
  const int64_t block = 2 * 2 * C            // ln1, ln2
                        + 3 * C * C + 3 * C  // qkv
                        + C * C + C          // proj
                        + C * H + H          // fc
                        + H * C + C;         // fc2
  const int64_t Vp = c.padded_vocab();
  return Vp * C + c.context * C + c.layers * block + 2 * C + (c.tie_embeddings ? 0 : C * Vp);
}

void Gpt::DeclareParameters() {
  const GptConfig& c = c_;
  const Status st = ValidateGptConfig(c);
  LS_CHECK(st.ok()) << st.ToString();
  const float std = 0.02f;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(c.layers));
  const int64_t C = c.width, H = c.mlp_ratio * c.width;
  wte_ = Embedding(ps_, "wte", c.padded_vocab(), C, Init::Normal(std));
  wpe_ = Embedding(ps_, "wpe", c.context, C, Init::Normal(std));
  blocks_.resize(c.layers);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blocks." + std::to_string(l);
    Block& b = blocks_[l];
    b.ln1 = LayerNorm(ps_, p + ".ln1", C);
    b.attn = CausalSelfAttention(ps_, p, C, c.heads, std, proj_std);
    b.ln2 = LayerNorm(ps_, p + ".ln2", C);
    b.fc = Linear(ps_, p + ".fc", C, H, true, Init::Normal(std), Init::Zeros());
    b.fc2 = Linear(ps_, p + ".fc2", H, C, true, Init::Normal(proj_std), Init::Zeros());
  }
  lnf_ = LayerNorm(ps_, "lnf", C);
  if (!c.tie_embeddings)
    head_ = Linear(ps_, "head", C, c.padded_vocab(), /*bias=*/false, Init::Normal(std), Init::Zeros());
}

Gpt::Gpt(const GptConfig& c) : c_(c) {
  DeclareParameters();
  ps_.Finalize(c.init_seed);
  LS_CHECK(ps_.numel() == GptParamCount(c)) << "Gpt parameter count " << ps_.numel();
}

Gpt::Gpt(const GptConfig& c, InferenceOnly) : c_(c) {
  DeclareParameters();
  ps_.AllocatePartial(/*params=*/true, /*grads=*/false);
  ps_.Initialize(c.init_seed);
}

Variable Gpt::Logits(Tape& tape, const int32_t* tokens, int64_t batch, int64_t seq) {
  LS_CHECK(tokens != nullptr && batch >= 1 && seq >= 1 && seq <= c_.context)
      << "Gpt: tokens [" << batch << ", " << seq << "] with context " << c_.context;
  const int64_t n = batch * seq;
  tensor::Tensor ids = tape.NewBuffer({batch, seq}, tensor::DType::kI32);
  std::memcpy(ids.data<int32_t>(), tokens, static_cast<size_t>(n) * sizeof(int32_t));
  tensor::Tensor pos = tape.NewBuffer({batch, seq}, tensor::DType::kI32);
  int32_t* p = pos.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(i % seq);

  // Separate statements: argument evaluation order is unspecified, and the tape order
  // (hence the order the gradient-ready hook reports) must not depend on the compiler.
  // Tied: the head's view of wte is taken before the lookup (tied_weight.h says why).
  Variable tied = c_.tie_embeddings ? TiedHeadWeight(tape, ps_.var(wte_.weight_index())) : Variable();
  Variable tok = wte_.Forward(tape, ids);
  Variable position = wpe_.Forward(tape, pos);
  Variable x = AddForward(tape, tok, position);
  for (const Block& b : blocks_) {
    x = b.attn.ForwardResidual(tape, b.ln1.Forward(tape, x), x);
    Variable h = b.fc.ForwardGelu(tape, b.ln2.Forward(tape, x));
    x = b.fc2.ForwardResidual(tape, h, x);
  }
  Variable xf = lnf_.Forward(tape, x);
  Variable logits =
      c_.tie_embeddings ? LinearForward(tape, xf, tied, Variable()) : head_.Forward(tape, xf);  // [B, T, Vp]
  return ReshapeForward(tape, logits, {n, c_.padded_vocab()});
}

Variable Gpt::Loss(Tape& tape, const ModelInput& in) {
  LS_CHECK(in.targets != nullptr) << "Gpt::Loss without targets";
  tape.DeclareParams(ps_.size());
  Variable logits = Logits(tape, in.tokens, in.batch, in.seq);
  const int64_t n = in.batch * in.seq;
  tensor::Tensor targets = tape.NewBuffer({n}, tensor::DType::kI32);
  std::memcpy(targets.data<int32_t>(), in.targets, static_cast<size_t>(n) * sizeof(int32_t));
  return SoftmaxCrossEntropyForward(tape, logits, targets, c_.vocab);
}

EvalResult Gpt::Evaluate(const ModelInput& in) {
  LS_CHECK(in.targets != nullptr) << "Gpt::Evaluate without targets";
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

double Gpt::TrainFlopsPerSample() const { return GptTrainFlopsPerSample(c_); }

GptFlopsPerToken GptForwardFlopsPerToken(const GptConfig& c) {
  const double C = static_cast<double>(c.width), T = static_cast<double>(c.context);
  const double V = static_cast<double>(c.padded_vocab()), r = static_cast<double>(c.mlp_ratio);
  GptFlopsPerToken f;
  f.block = 2.0 * (4.0 + 2.0 * r) * C * C + 2.0 * (T + 1.0) * C;  // qkv 3C^2, proj C^2, fc/fc2 rC^2; attention
  f.head = 2.0 * C * V;
  f.embedding = 2.0 * C;  // two lookups and an add
  f.softmax = 5.0 * V;    // softmax + cross-entropy
  return f;
}

double GptTrainFlopsPerSample(const GptConfig& c) {
  const GptFlopsPerToken f = GptForwardFlopsPerToken(c);
  return 3.0 * static_cast<double>(c.context) * (static_cast<double>(c.layers) * f.block + f.head);
}

std::string Gpt::Generate(const std::string& prompt, int n_tokens, float temperature, uint64_t seed) {
  std::vector<int32_t> ctx;
  for (unsigned char ch : prompt.empty() ? std::string("\n") : prompt) {
    ctx.push_back(static_cast<int32_t>(ch) % static_cast<int32_t>(c_.vocab));
  }
  std::string out;
  for (int32_t t : GenerateTokens(ctx, n_tokens, temperature, seed)) out.push_back(static_cast<char>(t));
  return out;
}

std::vector<int32_t> Gpt::GenerateTokens(const std::vector<int32_t>& prompt, int n_tokens, float temperature,
                                         uint64_t seed, int top_k) {
  LS_CHECK(!prompt.empty()) << "Gpt::GenerateTokens: empty prompt";
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
