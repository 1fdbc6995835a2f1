// Llama: the Llama family's decoder (Llama 2/3, SmolLM2, TinyLlama), transformers'
// LlamaForCausalLM exactly, in fp32:
//   x = embed_tokens(tokens)
//   per layer: h = rmsnorm(x) * input_layernorm
//              q, k, v = q_proj(h), k_proj(h), v_proj(h)          (no biases)
//              q, k rotated by RoPE (nn/rotary.h: rotate_half, theta, optional llama3 scaling)
//              x = x + o_proj(softmax(q k^T / sqrt(d) + causal mask) v)
//                  (grouped-query attention: query head h reads key/value head h / (heads / kv_heads))
//              h = rmsnorm(x) * post_attention_layernorm
//              x = x + down_proj(silu(gate_proj(h)) * up_proj(h))
//   logits = lm_head(rmsnorm(x) * norm)   (lm_head is embed_tokens with model.tie_embeddings)
// Parameter names are transformers' without the "model." prefix ("embed_tokens.weight",
// "layers.0.self_attn.q_proj.weight", "layers.0.mlp.gate_proj.weight", "norm.weight",
// "lm_head.weight"), registered in forward order, so Hugging Face weights map one to one.
// Init (the peer's, shared/peers/torch_llama.py): N(0, 0.02) for every matrix and the
// embedding, norms 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/nn/embedding.h"
#include "lockstep/nn/linear.h"
#include "lockstep/nn/model.h"
#include "lockstep/nn/rms_norm.h"
#include "lockstep/nn/rotary.h"

namespace lockstep::nn {

struct LlamaConfig {
  int64_t vocab = 256;
  int64_t context = 128;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t width = 128;
  int64_t ffn_hidden = 384;
  int64_t head_dim = 0;  // 0: width / heads
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  RopeScaling rope_scaling;
  bool tie_embeddings = false;
  int64_t vocab_pad = 1;  // embed_tokens/lm_head rows: vocab rounded up to a multiple of this
  uint64_t init_seed = 0;

  int64_t head_size() const { return head_dim > 0 ? head_dim : width / heads; }
  int64_t padded_vocab() const { return (vocab + vocab_pad - 1) / vocab_pad * vocab_pad; }
};

// One-line InvalidArgument naming the offending model.* key.
Status ValidateLlamaConfig(const LlamaConfig& c);
// Parameter count (transformers' sum(p.numel()) at vocab_pad 1).
int64_t LlamaParamCount(const LlamaConfig& c);
// Forward + backward FLOPs of one sequence: 3x the forward's matmul and attention FLOPs.
double LlamaTrainFlopsPerSample(const LlamaConfig& c);
// A Llama trains on token windows of exactly its context: layout {seq = context}.
Status CheckLlamaLayout(const LlamaConfig& c, const SampleLayout& layout);

class Llama : public Model {
 public:
  // `c` must be valid (ValidateLlamaConfig).
  explicit Llama(const LlamaConfig& c);
  // For inference only (generation, export): no gradient buffer.
  struct InferenceOnly {};
  Llama(const LlamaConfig& c, InferenceOnly);

  ParameterStore& params() override { return ps_; }
  const ParameterStore& params() const override { return ps_; }
  autograd::Variable Loss(autograd::Tape& tape, const ModelInput& in) override;
  EvalResult Evaluate(const ModelInput& in) override;
  void set_eval_pool(autograd::BufferPool* pool) override { eval_tape_.BorrowPool(pool); }
  double TrainFlopsPerSample() const override { return LlamaTrainFlopsPerSample(c_); }
  std::string name() const override { return "llama"; }
  Status CheckLayout(const SampleLayout& layout) const override { return CheckLlamaLayout(c_, layout); }

  // Logits [batch*seq, padded_vocab()] for tokens [batch, seq], seq <= context.
  autograd::Variable Logits(autograd::Tape& tape, const int32_t* tokens, int64_t batch, int64_t seq);

  // `n_tokens` tokens after `prompt` (non-empty), each from the logits of the last
  // min(context, length) tokens through nn::TokenSampler.
  std::vector<int32_t> GenerateTokens(const std::vector<int32_t>& prompt, int n_tokens, float temperature,
                                      uint64_t seed, int top_k = 0);

  const LlamaConfig& config() const { return c_; }

 private:
  void DeclareParameters();
  struct Layer {
    RmsNorm input_norm, post_norm;
    Linear q, k, v, o, gate, up, down;
  };

  LlamaConfig c_;
  ParameterStore ps_;
  Embedding embed_;
  std::vector<Layer> layers_;
  RmsNorm norm_;
  Linear head_;
  RotaryTables rope_;
  autograd::Tape eval_tape_;
};

}  // namespace lockstep::nn
