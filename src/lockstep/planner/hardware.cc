#include "lockstep/planner/hardware.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lockstep/runtime/setup/config_keys.h"

namespace lockstep::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A required number of the hardware file: present, a number, within [lo, hi].
Status Field(const toml::table& t, const std::string& path, const char* key, double lo, double hi, double* out) {
  const toml::node_view<const toml::node> n = t.at_path(key);
  std::optional<double> v = n.value<double>();
  if (!n) return Status::InvalidArgument(path + ": '" + key + "' is missing");
  if (!v) return Status::InvalidArgument(path + ": '" + key + "' must be a number");
  if (!(*v >= lo && *v <= hi))
    return Status::InvalidArgument(path + ": '" + key + "' = " + std::to_string(*v) + " is out of range [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = *v;
  return Status::Ok();
}

Status ReadLink(const toml::table& t, const std::string& path, const std::string& section, Link* l) {
  LS_RETURN_IF_ERROR(Field(t, path, (section + ".bandwidth_gbs").c_str(), 1e-6, 1e9, &l->bandwidth_gbs));
  LS_RETURN_IF_ERROR(Field(t, path, (section + ".latency_us").c_str(), 0, 1e9, &l->latency_us));
  return Field(t, path, (section + ".efficiency").c_str(), 1e-6, 1, &l->efficiency);
}

// One layout of a described machine.
struct Layout {
  int dp, tp, pp, zero, v;  // v: interleaved virtual stages per pipeline rank
  int64_t rows;             // micro-batch rows
  int64_t micros;
  std::string recompute;
};

struct Costs {
  const Hardware& hw;
  const ModelShape& m;
  int workers;
  bool clips;  // optim.grad_clip > 0

  double MatmulMs(double flops) const { return flops / (hw.peak_tflops_bf16 * 1e12 * hw.matmul_efficiency) * 1e3; }
  double MemoryMs(double bytes) const { return bytes / (hw.memory_gbs * 1e9 * hw.memory_efficiency) * 1e3; }
  // Ring collective over n devices moving `bytes` (the whole vector): allreduce 2(n-1)/n of it
  // per device, all-gather and reduce-scatter (n-1)/n, a send all of it once.
  double CollectiveMs(const Link& l, int n, double bytes, double factor) const {
    if (n <= 1) return 0;
    return factor * bytes / (l.bandwidth_gbs * 1e9 * l.efficiency) * 1e3 + (n - 1) * l.latency_us * 1e-3;
  }
  const Link& LinkFor(int span) const { return span <= hw.devices_per_node ? hw.intra : hw.inter; }
  // Width of the keys (and of the values): kv_heads heads of width/heads (grouped-query attention).
  double KvWidth() const {
    return static_cast<double>(m.kv_heads) * static_cast<double>(m.width) / static_cast<double>(m.heads);
  }

  // Activation bytes one layer keeps for its backward, for `tokens` tokens on one tp rank
  // (bf16; Korthikanti et al. 2022 section 4 for the GPT, the same counting for Llama).
  double SavedPerLayer(double tokens, int t, const std::string& recompute) const {
    const double h = static_cast<double>(m.width), a = static_cast<double>(m.heads), s = static_cast<double>(m.context);
    if (recompute == "full") return 2 * tokens * h;  // the block's input
    if (!m.llama) {
      if (recompute == "selective") return 34 * tokens * h / t;  // with sequence parallelism
      return tokens * h * (10 + 24.0 / t + 5 * a * s / (h * t));
    }
    const double kv = KvWidth(), f = static_cast<double>(m.ffn);
    // Flash attention keeps no s x s scores; per token: 4h replicated (norm inputs and
    // outputs), q, k, v, the attention output, three MLP tensors split over tp, fp32 logsumexp.
    if (recompute == "op")  // torchtitan's op policy: every second matmul output and attention kept
      return tokens * (2 * h + 2 * (h + kv + f + h + h) / t + 4 * a / t);
    return tokens * (2 * 4 * h + 2 * ((h + 2 * kv) + h + 3 * f) / t + 4 * a / t);
  }

  // Bytes the non-matmul work of one layer's forward moves. GPT (Megatron's fused kernels):
  // each activation it keeps is written once and read once. Llama as eager PyTorch runs it
  // (torchtitan without compile), counted op by op per token: two RMSNorms in fp32 (upcast,
  // square, mean, scale, downcast, weight: 36h bytes each), RoPE on q and k in fp32 (20 bytes
  // an element), attention's inputs and output, two residual adds (6h each), SwiGLU's silu and
  // product (12f).
  double ElementwiseBytes(double tokens, int t) const {
    if (!m.llama) return 2 * SavedPerLayer(tokens, t, "none");
    const double h = static_cast<double>(m.width), f = static_cast<double>(m.ffn), kv = KvWidth();
    return tokens * (72 * h + 12 * h + (20 * (h + kv) + 2 * (h + 2 * kv) + 2 * h + 12 * f) / t);
  }

  double LayerMatmulParams() const {
    const double h = static_cast<double>(m.width), f = static_cast<double>(m.ffn);
    if (!m.llama) return 12 * h * h;
    const double kv = KvWidth();
    return h * (h + 2 * kv) + h * h + 3 * h * f;
  }
  // torchtitan's op policy keeps the output of every second matmul a layer runs and recomputes
  // the others: of wq, wk, wv, wo, w1, w3, w2 (in call order) it recomputes wk, wo and w3.
  double OpRecomputedMatmulParams() const {
    const double h = static_cast<double>(m.width), f = static_cast<double>(m.ffn);
    const double kv = KvWidth();
    return h * kv + h * h + h * f;
  }
  // Attention score FLOPs per token per layer (QK^T and AV): Megatron's kernels compute the
  // whole s x s square, flash attention (Llama, torchtitan) only its causal half.
  double AttentionFlopsPerToken() const {
    const double s = static_cast<double>(m.context) * (m.llama ? 0.5 : 1.0);
    return 4.0 * s * static_cast<double>(m.width);
  }
};

Result<PlanRow> Predict(const Costs& c, const Layout& L, int64_t global_batch) {
  const ModelShape& m = c.m;
  const int t = L.tp, p = L.pp;
  const double tokens = static_cast<double>(L.rows * m.context), h = static_cast<double>(m.width);
  const double layers = static_cast<double>(m.layers) / p;
  // One layer, one micro-batch: forward; backward twice the forward; recompute on top.
  // Megatron computes attention scores with ordinary GEMMs; Llama's flash attention is one fused
  // kernel with its own efficiency, whose backward does 2.5x its forward's FLOPs (five products
  // against two: it recomputes the scores; Dao 2023, FlashAttention-2).
  const double attn_flops = tokens * c.AttentionFlopsPerToken() / t;
  const double mm_fwd = tokens * 2 * c.LayerMatmulParams() / t + (m.llama ? 0 : attn_flops);
  const double attn_ms = m.llama ? attn_flops / (c.hw.peak_tflops_bf16 * 1e12 * c.hw.attention_efficiency) * 1e3 : 0;
  const double vec_fwd = c.ElementwiseBytes(tokens, t);
  const double f_ms = c.MatmulMs(mm_fwd) + attn_ms + c.MemoryMs(vec_fwd);
  double extra_ms = 0;
  if (L.recompute == "full") extra_ms = f_ms;
  if (L.recompute == "selective")
    extra_ms = (m.llama ? attn_ms : c.MatmulMs(attn_flops)) +
               c.MemoryMs(2 * 5 * static_cast<double>(m.heads) * static_cast<double>(m.context) * tokens / t);
  if (L.recompute == "op") extra_ms = c.MatmulMs(tokens * 2 * c.OpRecomputedMatmulParams() / t) + c.MemoryMs(vec_fwd);
  const Link& tp_link = c.LinkFor(t);
  const double ar = c.CollectiveMs(tp_link, t, 2 * tokens * h, 2.0 * (t - 1) / t);
  const int n_ar = 4 + (L.recompute == "full" ? 2 : 0);
  // The flash backward's 2.5x FLOPs at its own share of peak, beyond the 2x forward counted in 3 * f_ms.
  const double flash_bwd_extra_ms = (2.5 * c.hw.attention_efficiency / c.hw.attention_bwd_efficiency - 2.0) * attn_ms;
  const double layer_ms = 3 * f_ms + flash_bwd_extra_ms + extra_ms + n_ar * ar;
  // The head (last stage): its matmul and the bf16 logits with their fp32 softmax.
  const double vocab = static_cast<double>(m.vocab);
  const double head_ms = 3 * (c.MatmulMs(2 * tokens * h * vocab / t) + c.MemoryMs(tokens * vocab / t * 12));
  // One stage holds the whole model (the embedding and an untied head both); across stages
  // the first holds the embedding and the last the head, the larger of them bounds the two.
  const double block_params = layers * static_cast<double>(m.LayerParams()) / t;
  const double local_params =
      p == 1 ? static_cast<double>(m.TotalParams()) / t
             : block_params + static_cast<double>(std::max(m.EmbeddingParams(), m.HeadParams())) / t;
  // FSDP (ZeRO-3 over dp > 1): each all-gather's output is copied out of its flat buffer into
  // the parameters on the compute stream (PyTorch FSDP2's foreach_all_gather_copy_out), bf16
  // read and written: the blocks' twice a micro-batch (the forward's gather and the backward's
  // again), the unit outside them (embeddings, head) once (FSDP2 keeps the root gathered from
  // its forward to its backward).
  const double fsdp_copy_ms =
      L.zero == 3 && L.dp > 1 ? c.MemoryMs(2 * 2 * (2 * block_params + (local_params - block_params))) : 0;
  const double stage_ms = layers * layer_ms + head_ms + fsdp_copy_ms;  // the last stage, the slowest
  // Pipeline: m micro-batches through p stages of v virtual stages each (Megatron's
  // interleaved 1F1B: bubble (p-1)/v stage-times), plus the activation sends.
  const double mcount = static_cast<double>(L.micros);
  const double fill = p > 1 ? static_cast<double>(p - 1) / L.v : 0;
  const double send = c.CollectiveMs(c.LinkFor(t * p), 2, 2 * tokens * h / t, 1.0);
  const double sends = p > 1 ? 2.0 * L.v * mcount * send : 0;
  const double pipeline_ms = (mcount + fill) * stage_ms + sends;
  // Data parallelism over dp replicas (the outermost ranks).
  const Link& dp_link = c.LinkFor(c.workers);
  double dp_ms = 0;
  if (L.dp > 1 && L.zero < 3) {  // fp32 gradients allreduced after the step (no overlap)
    dp_ms = c.CollectiveMs(dp_link, L.dp, 4 * local_params, 2.0 * (L.dp - 1) / L.dp);
  } else if (L.dp > 1) {  // FSDP: gather bf16 weights twice, reduce-scatter fp32 gradients, per layer
    const double lp = static_cast<double>(m.LayerParams()) / t;
    const double comm = c.CollectiveMs(dp_link, L.dp, 2 * 2 * lp, (L.dp - 1.0) / L.dp) +
                        c.CollectiveMs(dp_link, L.dp, 4 * lp, (L.dp - 1.0) / L.dp);
    dp_ms = mcount * layers * std::max(0.0, comm - layer_ms);  // hidden behind the layer's compute
    // Except at the edges of each micro-batch: the unit outside the blocks (embeddings, head)
    // and the first block are gathered before any compute starts, and reduce-scattered after
    // the backward has ended (FSDP prefetches the next unit behind the current one's compute;
    // the first has none before it, the last none after).
    const double edge = local_params - block_params + lp;
    dp_ms += mcount * (c.CollectiveMs(dp_link, L.dp, 2 * edge, (L.dp - 1.0) / L.dp) +
                       c.CollectiveMs(dp_link, L.dp, 4 * edge, (L.dp - 1.0) / L.dp));
  }
  // Memory per device: mixed-precision Adam states (bf16 weights + fp32 master, gradients and
  // moments: 18 bytes; ZeRO-1 shards the 12 bytes of master and moments, FSDP all 16 fp32 bytes).
  const double dp = L.dp;
  const double state_bytes = L.zero == 0 ? 18 : L.zero == 1 ? 6 + 12 / dp : 16 / dp;
  const double states = local_params * state_bytes;
  // Activations: the first stage holds p micro-batches of L/p layers under 1F1B (L layers'
  // worth; interleaving adds (p-1)/(p v) of it), the last one micro-batch and the logits
  // (bf16, their fp32 softmax and its gradient: 10 bytes a logit). Recompute needs one layer's
  // full activations while it runs (counted as transient).
  const double per_layer = c.SavedPerLayer(tokens, t, L.recompute);
  const double first_act =
      static_cast<double>(m.layers) * (p > 1 && L.v > 1 ? 1 + (p - 1.0) / (p * L.v) : 1) * per_layer;
  const double logits = tokens * vocab / t * 10;
  const double last_act = (p > 1 ? layers * per_layer : first_act) + logits;
  const double transient = L.recompute == "none" ? 0 : c.SavedPerLayer(tokens, t, "none");
  const double fsdp_units = L.zero == 3 ? 2 * (2 * 2 + 4) * static_cast<double>(m.LayerParams()) / t : 0;
  // The update reads and writes the states; gradient clipping first reads every gradient element
  // the rank holds (fp32) for the norm and scales them in place (torch's clip_grad_norm_ and
  // Megatron's clip multiply by the clamped coefficient whatever the norm): 12 bytes each.
  const double held_grads = local_params / (L.zero >= 1 ? dp : 1);
  const double optimizer_ms = c.MemoryMs(2 * local_params * state_bytes + (c.clips ? 12 * held_grads : 0));
  PlanRow row;
  Candidate& cand = row.candidate;
  cand.dims.dp = L.dp;
  cand.dims.tp = t;
  cand.dims.pp = p;
  cand.zero = L.zero;
  cand.micros = static_cast<int>(L.micros);
  cand.precision = "bf16";
  cand.recompute = L.recompute;
  cand.interleave = L.v;
  cand.micro_rows = L.rows;
  Prediction& pr = row.prediction;
  auto stage_memory = [&](double act) {
    StageMemory mem;
    mem.params_bytes = static_cast<int64_t>(local_params * (L.zero == 3 ? 4 / dp : 2));
    mem.grads_bytes = static_cast<int64_t>(local_params * (L.zero == 3 ? 4 / dp : 4));
    mem.optimizer_bytes = static_cast<int64_t>(states) - mem.params_bytes - mem.grads_bytes;
    mem.in_flight_bytes = static_cast<int64_t>(fsdp_units + transient);
    mem.activation_bytes = static_cast<int64_t>(act);
    mem.peak_bytes = static_cast<int64_t>(states + fsdp_units + transient + act);
    return mem;
  };
  pr.memory = {stage_memory(p > 1 ? first_act : last_act)};
  if (p > 1) pr.memory.push_back(stage_memory(last_act));
  for (const StageMemory& sm : pr.memory) pr.peak_bytes = std::max(pr.peak_bytes, sm.peak_bytes);
  pr.compute_ms = mcount * (layers * (3 * f_ms + flash_bwd_extra_ms + extra_ms) + head_ms + fsdp_copy_ms);
  pr.pipeline_ms = pipeline_ms;
  pr.bubble = p > 1 ? fill / (mcount + fill) : 0;
  pr.comm_exposed_ms = mcount * layers * n_ar * ar + sends + dp_ms;
  pr.comm_total_ms = pr.comm_exposed_ms;
  pr.optimizer_ms = optimizer_ms;
  pr.step_ms = pipeline_ms + dp_ms + optimizer_ms;
  row.units_per_s = static_cast<double>(global_batch * m.context) / (pr.step_ms * 1e-3);
  return row;
}

std::vector<PlanRow> Enumerate(const Costs& c, int64_t global_batch) {
  const ModelShape& m = c.m;
  std::vector<PlanRow> rows;
  const int n = c.workers;
  std::vector<std::string> recomputes = {"none", "selective", "full"};
  if (m.llama) recomputes = {"none", "op", "full"};
  for (int tp = 1; tp <= std::min(n, c.hw.devices_per_node); tp *= 2) {
    if (n % tp || m.heads % tp || m.kv_heads % tp) continue;
    for (int pp = 1; pp <= n / tp; ++pp) {
      if ((n / tp) % pp || m.layers % pp) continue;
      const int dp = n / tp / pp;
      if (global_batch % dp) continue;
      const int64_t local = global_batch / dp;
      for (int64_t rows_per_micro = 1; rows_per_micro <= local; rows_per_micro *= 2) {
        if (local % rows_per_micro) continue;
        const int64_t micros = local / rows_per_micro;
        for (int v = 1; v <= (pp > 1 ? 4 : 1); ++v) {
          if (v > 1 && ((m.layers / pp) % v || micros % pp)) continue;
          for (int zero : {0, 1, 3}) {
            if (zero > 0 && dp == 1) continue;
            for (const std::string& r : recomputes) {
              Result<PlanRow> row = Predict(c, {dp, tp, pp, zero, v, rows_per_micro, micros, r}, global_batch);
              if (row.ok()) rows.push_back(std::move(*row));
            }
          }
        }
      }
    }
  }
  return rows;
}

}  // namespace

Result<Hardware> ReadHardware(const std::string& path) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument("--hardware " + path + ": " + std::string(e.description()));
  }
  Hardware hw;
  hw.name = t["name"].value_or(std::string(path));
  double devices = 0;
  LS_RETURN_IF_ERROR(Field(t, path, "node.devices", 1, 1e6, &devices));
  hw.devices_per_node = static_cast<int>(devices);
  LS_RETURN_IF_ERROR(Field(t, path, "device.memory_gib", 1e-6, 1e9, &hw.memory_gib));
  LS_RETURN_IF_ERROR(Field(t, path, "device.peak_tflops_bf16", 1e-6, 1e9, &hw.peak_tflops_bf16));
  LS_RETURN_IF_ERROR(Field(t, path, "device.peak_tflops_fp32", 1e-6, 1e9, &hw.peak_tflops_fp32));
  LS_RETURN_IF_ERROR(Field(t, path, "device.matmul_efficiency", 1e-6, 1, &hw.matmul_efficiency));
  LS_RETURN_IF_ERROR(Field(t, path, "device.attention_efficiency", 1e-6, 1, &hw.attention_efficiency));
  hw.attention_bwd_efficiency = hw.attention_efficiency;
  if (t.at_path("device.attention_bwd_efficiency"))
    LS_RETURN_IF_ERROR(Field(t, path, "device.attention_bwd_efficiency", 1e-6, 1, &hw.attention_bwd_efficiency));
  LS_RETURN_IF_ERROR(Field(t, path, "device.memory_gbs", 1e-6, 1e9, &hw.memory_gbs));
  LS_RETURN_IF_ERROR(Field(t, path, "device.memory_efficiency", 1e-6, 1, &hw.memory_efficiency));
  LS_RETURN_IF_ERROR(ReadLink(t, path, "intra_node", &hw.intra));
  LS_RETURN_IF_ERROR(ReadLink(t, path, "inter_node", &hw.inter));
  return hw;
}

int64_t ModelShape::LayerParams() const {
  const int64_t h = width, kv = kv_heads * (width / heads);
  if (!llama) return 12 * h * h + 13 * h;
  return h * (h + 2 * kv) + h * h + 3 * h * ffn + 2 * h;
}
int64_t ModelShape::EmbeddingParams() const { return vocab * width + (llama ? 0 : context * width); }
int64_t ModelShape::HeadParams() const { return llama ? vocab * width + width : 0; }
int64_t ModelShape::TotalParams() const {
  return layers * LayerParams() + EmbeddingParams() + HeadParams() + (llama ? 0 : 2 * width);
}

Result<ModelShape> ReadModelShape(const Config& config) {
  ModelShape m;
  LS_ASSIGN_OR_RETURN(std::string kind, config.GetString("model.kind", ""));
  if (kind != "gpt" && kind != "llama")
    return Status::InvalidArgument("--hardware plans a transformer: model.kind must be \"gpt\" or \"llama\", got \"" +
                                   kind + "\"");
  m.llama = kind == "llama";
  LS_ASSIGN_OR_RETURN(m.vocab, config.GetInt("model.vocab", 256));
  LS_ASSIGN_OR_RETURN(m.context, config.GetInt("model.context", 128));
  LS_ASSIGN_OR_RETURN(m.layers, config.GetInt("model.layers", 4));
  LS_ASSIGN_OR_RETURN(m.heads, config.GetInt("model.heads", 4));
  LS_ASSIGN_OR_RETURN(m.width, config.GetInt("model.width", 128));
  LS_ASSIGN_OR_RETURN(int64_t ratio, config.GetInt("model.mlp_ratio", 4));
  LS_ASSIGN_OR_RETURN(m.kv_heads, config.GetInt("model.kv_heads", m.heads));
  LS_ASSIGN_OR_RETURN(m.ffn, config.GetInt("model.ffn_hidden", ratio * m.width));
  for (auto [key, v] : {std::pair<const char*, int64_t>{"model.vocab", m.vocab},
                        {"model.context", m.context},
                        {"model.layers", m.layers},
                        {"model.heads", m.heads},
                        {"model.width", m.width},
                        {"model.kv_heads", m.kv_heads},
                        {"model.ffn_hidden", m.ffn}})
    if (v < 1) return Status::InvalidArgument(std::string(key) + ": " + std::to_string(v) + " must be at least 1");
  if (m.width % m.heads || m.heads % m.kv_heads)
    return Status::InvalidArgument("model.width must divide by model.heads, and model.heads by model.kv_heads");
  return m;
}

Result<PlanResult> PlanForHardware(const Hardware& hw, const ModelShape& m, int64_t global_batch, int workers,
                                   int64_t mem_limit, bool clips_gradients) {
  const int64_t limit = mem_limit > 0 ? mem_limit : static_cast<int64_t>(hw.memory_gib * kGiB);
  std::vector<PlanRow> rows = Enumerate({hw, m, workers, clips_gradients}, global_batch);
  if (rows.empty())
    return Status::InvalidArgument("--nproc " + std::to_string(workers) + ": no layout of " + std::to_string(workers) +
                                   " devices splits this model (heads, layers) and train.batch_size " +
                                   std::to_string(global_batch));
  std::vector<PlanRow> one =
      workers > 1 ? Enumerate({hw, m, 1, clips_gradients}, global_batch) : std::vector<PlanRow>();
  return Decide(workers, true, limit, limit, std::move(rows), one);
}

Status RunHardwarePlan(const PlanOptions& o) {
  LS_ASSIGN_OR_RETURN(Config config, Config::LoadFile(o.config_path, o.overrides));
  LS_ASSIGN_OR_RETURN(ModelShape shape, ReadModelShape(config));
  LS_ASSIGN_OR_RETURN(int64_t batch, config.GetInt("train.batch_size", 16));
  if (batch < 1) return Status::InvalidArgument("train.batch_size must be at least 1");
  LS_RETURN_IF_ERROR(runtime::CheckConfigKeys(config).status());
  LS_ASSIGN_OR_RETURN(Hardware hw, ReadHardware(o.hardware_path));
  LS_ASSIGN_OR_RETURN(double clip, config.GetDouble("optim.grad_clip", 0.0));
  LS_ASSIGN_OR_RETURN(PlanResult r, PlanForHardware(hw, shape, batch, o.nproc, o.mem_limit, clip > 0));
  std::printf("%s, %.2fB parameters, %d devices of %s, global batch %lld x %lld tokens\n\n",
              shape.llama ? "llama" : "gpt", static_cast<double>(shape.TotalParams()) * 1e-9, o.nproc, hw.name.c_str(),
              static_cast<long long>(batch), static_cast<long long>(shape.context));
  // The table lists the best 40; plan.json has them all.
  PlanResult shown = r;
  if (shown.rows.size() > 40) shown.rows.resize(40);
  PrintPlan(shown, stdout);
  return WritePlanJson(r, o.json_path);
}

}  // namespace lockstep::planner
