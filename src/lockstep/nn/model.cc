#include "lockstep/nn/model.h"

#include "lockstep/nn/cnn.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/nn/llama.h"

namespace lockstep::nn {

EvalResult Model::Evaluate(const ModelInput& in) {
  autograd::Tape tape;
  tape.set_grad_enabled(false);
  const double loss = Loss(tape, in).data()[0];
  return {loss * static_cast<double>(in.batch), in.batch, 0};
}

Result<GptConfig> ReadGptConfig(const Config& cfg) {
  GptConfig c;
  LS_ASSIGN_OR_RETURN(int64_t seed, cfg.GetInt("model.init_seed", 0));
  if (seed < 0)
    return Status::InvalidArgument("model.init_seed: " + std::to_string(seed) + " is invalid; expected >= 0");
  LS_ASSIGN_OR_RETURN(c.vocab, cfg.GetInt("model.vocab", c.vocab));
  LS_ASSIGN_OR_RETURN(c.context, cfg.GetInt("model.context", c.context));
  LS_ASSIGN_OR_RETURN(c.layers, cfg.GetInt("model.layers", c.layers));
  LS_ASSIGN_OR_RETURN(c.heads, cfg.GetInt("model.heads", c.heads));
  LS_ASSIGN_OR_RETURN(c.width, cfg.GetInt("model.width", c.width));
  LS_ASSIGN_OR_RETURN(c.mlp_ratio, cfg.GetInt("model.mlp_ratio", c.mlp_ratio));
  LS_ASSIGN_OR_RETURN(c.vocab_pad, cfg.GetInt("model.vocab_pad", c.vocab_pad));
  LS_ASSIGN_OR_RETURN(c.tie_embeddings, cfg.GetBool("model.tie_embeddings", c.tie_embeddings));
  c.init_seed = static_cast<uint64_t>(seed);
  LS_RETURN_IF_ERROR(ValidateGptConfig(c));
  return c;
}

Result<LlamaConfig> ReadLlamaConfig(const Config& cfg) {
  LlamaConfig c;
  LS_ASSIGN_OR_RETURN(int64_t seed, cfg.GetInt("model.init_seed", 0));
  if (seed < 0)
    return Status::InvalidArgument("model.init_seed: " + std::to_string(seed) + " is invalid; expected >= 0");
  c.init_seed = static_cast<uint64_t>(seed);
  LS_ASSIGN_OR_RETURN(c.vocab, cfg.GetInt("model.vocab", c.vocab));
  LS_ASSIGN_OR_RETURN(c.context, cfg.GetInt("model.context", c.context));
  LS_ASSIGN_OR_RETURN(c.layers, cfg.GetInt("model.layers", c.layers));
  LS_ASSIGN_OR_RETURN(c.heads, cfg.GetInt("model.heads", c.heads));
  LS_ASSIGN_OR_RETURN(c.kv_heads, cfg.GetInt("model.kv_heads", c.heads));
  LS_ASSIGN_OR_RETURN(c.width, cfg.GetInt("model.width", c.width));
  LS_ASSIGN_OR_RETURN(c.ffn_hidden, cfg.GetInt("model.ffn_hidden", c.ffn_hidden));
  LS_ASSIGN_OR_RETURN(c.head_dim, cfg.GetInt("model.head_dim", c.head_dim));
  LS_ASSIGN_OR_RETURN(c.rope_theta, cfg.GetDouble("model.rope_theta", c.rope_theta));
  LS_ASSIGN_OR_RETURN(c.norm_eps, cfg.GetDouble("model.norm_eps", c.norm_eps));
  LS_ASSIGN_OR_RETURN(c.vocab_pad, cfg.GetInt("model.vocab_pad", c.vocab_pad));
  LS_ASSIGN_OR_RETURN(c.tie_embeddings, cfg.GetBool("model.tie_embeddings", c.tie_embeddings));
  RopeScaling& r = c.rope_scaling;
  LS_ASSIGN_OR_RETURN(r.type, cfg.GetString("model.rope_scaling", r.type));
  LS_ASSIGN_OR_RETURN(r.factor, cfg.GetDouble("model.rope_factor", r.factor));
  LS_ASSIGN_OR_RETURN(r.low_freq_factor, cfg.GetDouble("model.rope_low_freq_factor", r.low_freq_factor));
  LS_ASSIGN_OR_RETURN(r.high_freq_factor, cfg.GetDouble("model.rope_high_freq_factor", r.high_freq_factor));
  LS_ASSIGN_OR_RETURN(r.original_context, cfg.GetInt("model.rope_original_context", r.original_context));
  LS_RETURN_IF_ERROR(ValidateLlamaConfig(c));
  return c;
}

Result<std::unique_ptr<Model>> MakeModel(const Config& cfg) {
  LS_ASSIGN_OR_RETURN(std::string kind, cfg.GetString("model.kind", ""));
  LS_ASSIGN_OR_RETURN(int64_t seed, cfg.GetInt("model.init_seed", 0));
  if (seed < 0) {
    return Status::InvalidArgument("model.init_seed: " + std::to_string(seed) + " is invalid; expected >= 0");
  }
  if (kind == "gpt") {
    LS_ASSIGN_OR_RETURN(GptConfig c, ReadGptConfig(cfg));
    return std::unique_ptr<Model>(std::make_unique<Gpt>(c));
  }
  if (kind == "llama") {
    LS_ASSIGN_OR_RETURN(LlamaConfig c, ReadLlamaConfig(cfg));
    return std::unique_ptr<Model>(std::make_unique<Llama>(c));
  }
  if (kind == "cnn") {
    CnnConfig c;
    c.init_seed = static_cast<uint64_t>(seed);
    return std::unique_ptr<Model>(std::make_unique<Cnn>(c));
  }
  if (kind.empty()) {
    return Status::InvalidArgument("model.kind: missing; expected \"gpt\", \"llama\" or \"cnn\"");
  }
  return Status::InvalidArgument("model.kind: \"" + kind + "\" is not a model; expected \"gpt\", \"llama\" or \"cnn\"");
}

}  // namespace lockstep::nn
