#include "lockstep/runtime/setup/config_keys.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace lockstep::runtime {
namespace {

constexpr ConfigKey kKeys[] = {
    // [model]
    {"model.kind", "string", "", "the model: \"gpt\", \"llama\" or \"cnn\" (required)"},
    {"model.vocab", "int", "256", "gpt, llama: vocabulary size"},
    {"model.context", "int", "128", "gpt, llama: context length (tokens per row)"},
    {"model.layers", "int", "4", "gpt, llama: transformer blocks"},
    {"model.heads", "int", "4", "gpt, llama: attention heads"},
    {"model.width", "int", "128", "gpt, llama: embedding width"},
    {"model.mlp_ratio", "int", "4", "gpt: MLP width / embedding width"},
    {"model.init_seed", "int", "0", "seed of the parameter initialisation"},
    {"model.vocab_pad", "int", "1",
     "gpt, llama: pad the vocabulary rows to a multiple of this (GPT-2: 64); never predicted"},
    {"model.tie_embeddings", "bool", "false", "gpt, llama: the head is the token embedding (GPT-2, SmolLM2)"},
    {"model.kv_heads", "int", "", "llama: key/value heads of grouped-query attention (default model.heads)"},
    {"model.ffn_hidden", "int", "384", "llama: SwiGLU hidden width (lockstep plan --hardware: default mlp_ratio x width)"},
    {"model.head_dim", "int", "0", "llama: attention head dimension (0: model.width / model.heads)"},
    {"model.rope_theta", "float", "10000.0", "llama: rotary embedding base"},
    {"model.norm_eps", "float", "1e-05", "llama: RMSNorm epsilon"},
    {"model.rope_scaling", "string", "\"none\"", "llama: \"none\" or \"llama3\" (Llama 3.1's frequency scaling)"},
    {"model.rope_factor", "float", "8.0", "llama, rope_scaling = llama3: factor"},
    {"model.rope_low_freq_factor", "float", "1.0", "llama, rope_scaling = llama3: low_freq_factor"},
    {"model.rope_high_freq_factor", "float", "4.0", "llama, rope_scaling = llama3: high_freq_factor"},
    {"model.rope_original_context", "int", "8192", "llama, rope_scaling = llama3: original_max_position_embeddings"},
    // [data]
    {"data.kind", "string", "",
     "the data set: \"text\" (byte corpus), \"tokens\" (uint16 token files) or \"fashion-mnist\" (required)"},
    {"data.dir", "string", "",
     "where the data set lives (default: /usr/share/games/fortunes for text, "
     "/usr/share/datasets/fashion-mnist for fashion-mnist)"},
    {"data.final_batch", "string", "\"drop\"", "a last partial batch of an epoch: \"drop\" or \"pad\""},
    {"data.train", "string", "", "tokens: the training token file(s), a path or glob (shards in name order)"},
    {"data.val", "string", "", "tokens: the validation token file(s) (default: the last 10% of data.train)"},
    {"data.format", "string", "\"auto\"", "tokens: \"auto\", \"llmc\" (1024-byte header) or \"raw\" (nanoGPT)"},
    {"data.loss_mask", "bool", "false",
     "tokens: train only on the targets each token file's .mask marks (lockstep tokens --prompt-key/--response-key)"},
    {"data.tokenizer", "string", "",
     "tokens: the tokenizer.json the files were made with (kept in every checkpoint for sample and export)"},
    // [optim]
    {"optim.name", "string", "\"adamw\"", "\"adamw\" or \"sgd\""},
    {"optim.lr", "float", "0.001", "peak learning rate"},
    {"optim.weight_decay", "float", "", "decoupled (adamw, default 0.01) or L2 (sgd, default 0.0) weight decay"},
    {"optim.beta1", "float", "0.9", "adamw: first-moment decay"},
    {"optim.beta2", "float", "0.999", "adamw: second-moment decay"},
    {"optim.eps", "float", "1e-08", "adamw: denominator epsilon"},
    {"optim.momentum", "float", "0.0", "sgd: momentum"},
    {"optim.dampening", "float", "0.0", "sgd: dampening"},
    {"optim.nesterov", "bool", "false", "sgd: Nesterov momentum"},
    {"optim.grad_clip", "float", "0.0", "clip the global gradient norm to this (0: no clipping)"},
    {"optim.schedule", "string", "\"constant\"", "learning rate after warmup: \"constant\" or \"cosine\""},
    {"optim.warmup_steps", "int", "0", "linear warmup steps"},
    {"optim.min_lr", "float", "", "cosine: the final learning rate (default optim.lr / 10)"},
    {"optim.decay_steps", "int", "", "cosine: steps over which it decays (default: the run's steps)"},
    // [train]
    {"train.batch_size", "int", "16", "global batch: rows of all workers together"},
    {"train.seed", "int", "1234", "seed of data order and sampling"},
    {"train.steps", "int", "0", "optimizer steps (0: use train.epochs)"},
    {"train.epochs", "float", "0.0", "epochs, when train.steps is 0"},
    {"train.threads", "int", "0", "compute threads per worker (0: cores / workers on this machine)"},
    {"train.log_every", "int", "10", "a progress line every this many steps"},
    {"train.accum_steps", "int", "1", "micro-batches accumulated per step"},
    {"train.det_shards", "int", "8", "--deterministic: canonical shards per global batch (a power of two)"},
    {"train.bucket_bytes", "size", "26214400", "DDP gradient bucket size"},
    {"train.det_tp_slices", "int", "0", "--deterministic with tp: canonical slices per split layer (0: auto)"},
    {"train.pp_microbatches", "int", "0", "pipeline micro-batches per step (0: 2 x pp)"},
    {"train.pp_schedule", "string", "\"1f1b\"", "pipeline schedule: \"1f1b\" or \"gpipe\""},
    {"train.skip_nonfinite", "bool", "false",
     "skip the update of a step with a NaN/inf gradient or loss instead of stopping"},
    {"train.max_skipped", "int", "10", "with skip_nonfinite: stop after more than this many such steps in a row"},
    {"train.recompute", "string", "\"none\"",
     "\"block\": transformer blocks recompute their forward in backward (less memory, ~1/3 more compute)"},
    {"train.precision", "string", "\"fp32\"",
     "\"fp32\" or \"bf16\": bf16 rounds the operands of every GEMM and convolution (fp32 accumulation, "
     "fp32 master weights, gradients and optimizer state)"},
    {"train.grad_dtype", "string", "\"fp32\"",
     "\"fp32\" or \"bf16\": the type gradients are reduced in over data-parallel workers (bf16 halves the bytes)"},
    {"train.grad_compression", "string", "\"none\"",
     "\"none\", \"bf16\" (train.grad_dtype = bf16) or \"powersgd\" (rank-r factors with error feedback)"},
    {"train.powersgd_rank", "int", "4", "powersgd: rank of each gradient matrix's factors"},
    {"train.powersgd_start_step", "int", "10", "powersgd: steps reduced uncompressed before compression starts"},
    {"train.sync", "string", "\"every_step\"",
     "\"every_step\" or \"diloco\": replicas take diloco_inner_steps steps alone, then average their change"},
    {"train.diloco_inner_steps", "int", "50", "diloco: inner steps between synchronisations (H)"},
    {"train.diloco_outer_lr", "float", "0.7", "diloco: the outer Nesterov SGD's learning rate"},
    {"train.diloco_outer_momentum", "float", "0.9", "diloco: the outer Nesterov SGD's momentum"},
    {"train.diloco_fragments", "int", "1", "diloco: fragments of the model synchronised in turn (streaming DiLoCo)"},
    {"train.diloco_outer_dtype", "string", "\"fp32\"", "diloco: \"fp32\" or \"bf16\" outer gradient on the wire"},
    {"train.diloco_overlap_steps", "int", "0",
     "diloco: inner steps a fragment's exchange runs beside before it is applied (0: it blocks its step)"},
    {"train.diloco_merge_alpha", "float", "0.0",
     "diloco, overlapping: weight of the replica's own parameters when the averaged fragment arrives"},
    {"train.straggler_ratio", "float", "1.2",
     "a worker whose compute time stays above this times the median of its peers is a straggler"},
    {"train.straggler_steps", "int", "20", "steps in a row above train.straggler_ratio before a straggler is named"},
    // [eval]
    {"eval.every", "int", "0", "validate every this many steps (0: once per epoch, and at the end)"},
    {"eval.batch_size", "int", "", "validation rows per batch (default train.batch_size)"},
    {"eval.batches", "int", "0", "validation batches (0: the whole split)"},
    // [checkpoint]
    {"checkpoint.every", "int", "0", "save every this many steps (0: only at the end)"},
    {"checkpoint.keep", "int", "3", "checkpoints kept"},
    {"checkpoint.async", "bool", "true", "write checkpoints in the background"},
};

// Levenshtein distance, for "did you mean".
size_t Distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::span<const ConfigKey> AllConfigKeys() { return kKeys; }

const ConfigKey* FindConfigKey(std::string_view name) {
  for (const ConfigKey& k : kKeys)
    if (name == k.name) return &k;
  return nullptr;
}

Result<std::vector<std::string>> CheckConfigKeys(const Config& config, std::span<const JobConfigKey> extra) {
  std::vector<std::string> ignored;
  for (const std::string& key : config.Keys()) {
    const bool declared = std::any_of(extra.begin(), extra.end(), [&](const JobConfigKey& k) { return k.name == key; });
    if (FindConfigKey(key) == nullptr && !declared) {
      std::string near;
      size_t best = 3;  // at most two edits away
      auto consider = [&](const std::string& name) {
        const size_t d = Distance(key, name);
        if (d < best) best = d, near = name;
      };
      for (const ConfigKey& k : kKeys) consider(k.name);
      for (const JobConfigKey& k : extra) consider(k.name);
      return Status::InvalidArgument("unknown config key '" + key + "'" +
                                     (near.empty() ? std::string() : " (did you mean '" + near + "'?)"));
    }
    if (config.EffectiveValue(key) == nullptr)
      ignored.push_back("config key '" + key + "' is not used with this run's options and is ignored");
  }
  return ignored;
}

std::string DescribeConfig(const Config& config, std::span<const JobConfigKey> extra) {
  std::vector<ConfigKey> keys(std::begin(kKeys), std::end(kKeys));
  for (const JobConfigKey& k : extra)
    keys.push_back({k.name.c_str(), k.type.c_str(), k.default_value.c_str(), k.meaning.c_str()});
  std::string out;
  char line[512];
  for (const ConfigKey& k : keys) {
    const std::string* value = config.EffectiveValue(k.name);
    std::string shown, origin = config.Origin(k.name);
    if (value != nullptr) {
      shown = *value;
    } else if (config.Has(k.name)) {
      shown = config.ValueText(k.name);
      origin += ", unused";
    } else {
      shown = *k.default_value ? k.default_value : "-";
      origin = "unused";
    }
    std::snprintf(line, sizeof(line), "%-24s = %-22s # %-12s %s\n", k.name, shown.c_str(), origin.c_str(), k.meaning);
    out += line;
  }
  return out;
}

}  // namespace lockstep::runtime
