// A described machine's layout as the step model's input (DescribedLayoutInput, hardware.h):
// every stage's compute, tp collectives and memory by arithmetic over the model shape and the
// hardware file, and the terms where the frameworks it stands for (Megatron, FSDP) work their own
// way (StageCost::Described). PredictLayout then composes them as it composes a profile's.
#include <algorithm>
#include <cmath>

#include "lockstep/planner/hardware.h"

namespace lockstep::planner {
namespace {

// The arithmetic of a described machine: time from FLOPs and bytes at the file's efficiencies,
// collectives from its links, activations by Korthikanti et al. 2022.
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

}  // namespace

Result<LayoutInput> DescribedLayoutInput(const Hardware& hw, const ModelShape& m, const Candidate& cand, int workers,
                                         bool clips_gradients) {
  const Costs c{hw, m, workers, clips_gradients};
  const int t = cand.dims.tp, p = cand.dims.pp, v = cand.interleave;
  const std::string& recompute = cand.recompute;
  if (t < 1 || p < 1 || cand.dims.dp < 1 || v < 1 || cand.micro_rows < 1 || cand.micros < 1 || m.layers % p)
    return Status::InvalidArgument("plan --hardware: layout " + cand.layout() + " does not split the model");
  const double tokens = static_cast<double>(cand.micro_rows * m.context), h = static_cast<double>(m.width);
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
  if (recompute == "full") extra_ms = f_ms;
  if (recompute == "selective")
    extra_ms = (m.llama ? attn_ms : c.MatmulMs(attn_flops)) +
               c.MemoryMs(2 * 5 * static_cast<double>(m.heads) * static_cast<double>(m.context) * tokens / t);
  if (recompute == "op") extra_ms = c.MatmulMs(tokens * 2 * c.OpRecomputedMatmulParams() / t) + c.MemoryMs(vec_fwd);
  const Link& tp_link = c.LinkFor(t);
  const double ar = c.CollectiveMs(tp_link, t, 2 * tokens * h, 2.0 * (t - 1) / t);
  const int n_ar = 4 + (recompute == "full" ? 2 : 0);
  // The flash backward's 2.5x FLOPs at its own share of peak, beyond the 2x forward counted in 3 * f_ms.
  const double flash_bwd_extra_ms = (2.5 * c.hw.attention_efficiency / c.hw.attention_bwd_efficiency - 2.0) * attn_ms;
  // The head (last stage): its matmul and the bf16 logits with their fp32 softmax, forward and
  // twice that backward.
  const double vocab = static_cast<double>(m.vocab);
  const double head_fwd_ms = c.MatmulMs(2 * tokens * h * vocab / t) + c.MemoryMs(tokens * vocab / t * 12);
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
  const bool fsdp = cand.zero == 3 && cand.dims.dp > 1;
  const double copy_fwd_ms = fsdp ? c.MemoryMs(2 * 2 * local_params) : 0;
  const double copy_bwd_ms = fsdp ? c.MemoryMs(2 * 2 * block_params) : 0;
  // The activation a stage sends on, and its gradient back (Megatron's scatter-gather: 1/t each).
  const double send = c.CollectiveMs(c.LinkFor(t * p), 2, 2 * tokens * h / t, 1.0);
  // Data parallelism over dp replicas (the outermost ranks).
  const Link& dp_link = c.LinkFor(c.workers);
  const double mcount = static_cast<double>(cand.micros), dp = cand.dims.dp;
  double dp_ms = 0;
  if (cand.dims.dp > 1 && cand.zero < 3) {  // fp32 gradients allreduced after the step (no overlap)
    dp_ms = c.CollectiveMs(dp_link, cand.dims.dp, 4 * local_params, 2.0 * (dp - 1) / dp);
  } else if (cand.dims.dp > 1) {  // FSDP: gather bf16 weights twice, reduce-scatter fp32 gradients, per layer
    const double layer_ms = 3 * f_ms + flash_bwd_extra_ms + extra_ms + n_ar * ar;
    const double lp = static_cast<double>(m.LayerParams()) / t;
    const double comm = c.CollectiveMs(dp_link, cand.dims.dp, 2 * 2 * lp, (dp - 1.0) / dp) +
                        c.CollectiveMs(dp_link, cand.dims.dp, 4 * lp, (dp - 1.0) / dp);
    dp_ms = mcount * layers * std::max(0.0, comm - layer_ms);  // hidden behind the layer's compute
    // Except at the edges of each micro-batch: the unit outside the blocks (embeddings, head)
    // and the first block are gathered before any compute starts, and reduce-scattered after
    // the backward has ended (FSDP prefetches the next unit behind the current one's compute;
    // the first has none before it, the last none after).
    const double edge = local_params - block_params + lp;
    dp_ms += mcount * (c.CollectiveMs(dp_link, cand.dims.dp, 2 * edge, (dp - 1.0) / dp) +
                       c.CollectiveMs(dp_link, cand.dims.dp, 4 * edge, (dp - 1.0) / dp));
  }
  // The update reads and writes the states (18 bytes a parameter, the accounting StatesOf counts:
  // ZeRO-1 shards 12 of them, FSDP all 16 fp32 bytes); gradient clipping first reads every
  // gradient element the rank holds (fp32) for the norm and scales them in place (torch's
  // clip_grad_norm_ and Megatron's clip multiply by the clamped coefficient whatever the norm):
  // 12 bytes each.
  const double state_bytes = cand.zero == 0 ? 18 : cand.zero == 1 ? 6 + 12 / dp : 16 / dp;
  const double held_grads = local_params / (cand.zero >= 1 ? dp : 1);
  const double optimizer_ms = c.MemoryMs(2 * local_params * state_bytes + (c.clips ? 12 * held_grads : 0));
  // Activations: the first stage holds p micro-batches of L/p layers under 1F1B (L layers'
  // worth; interleaving adds (p-1)/(p v) of it), the last one micro-batch and the logits
  // (bf16, their fp32 softmax and its gradient: 10 bytes a logit). Recompute needs one layer's
  // full activations while it runs (counted as transient). The stages between hold at most the
  // first's (Korthikanti gives no other; the peak is the first's or the last's).
  const double per_layer = c.SavedPerLayer(tokens, t, recompute);
  const double first_act = static_cast<double>(m.layers) * (p > 1 && v > 1 ? 1 + (p - 1.0) / (p * v) : 1) * per_layer;
  const double logits = tokens * vocab / t * 10;
  const double last_act = (p > 1 ? layers * per_layer : first_act) + logits;
  const double transient = recompute == "none" ? 0 : c.SavedPerLayer(tokens, t, "none");
  const double fsdp_units = cand.zero == 3 ? 2 * (2 * 2 + 4) * static_cast<double>(m.LayerParams()) / t : 0;

  LayoutInput in;
  in.dp = cand.dims.dp;
  in.tp = t;
  in.pp = p;
  in.zero = cand.zero;
  in.micros = cand.micros;
  in.interleave = v;
  // Mixed precision (Korthikanti Fig. 1's accounting, torchtitan's FSDP): bf16 weights, the fp32
  // master with the optimizer's two moments.
  in.states = {StateBytes::Master::kOptimizer, 2, 8};
  for (int s = 0; s < p; ++s) {
    const bool last = s == p - 1;
    StageCost st;
    st.fwd_ms = layers * f_ms + (last ? head_fwd_ms : 0) + copy_fwd_ms;
    st.bwd_ms = layers * (2 * f_ms + flash_bwd_extra_ms + extra_ms) + (last ? 2 * head_fwd_ms : 0) + copy_bwd_ms;
    // Megatron's tensor parallelism: n_ar allreduces of the layer's [tokens, h] bf16 activation
    // (sequence parallelism's reduce-scatter and all-gather cost the same), not overlapped.
    st.tp_comm_ms = layers * n_ar * ar;
    st.tp_comm_in_compute = false;
    st.param_numels = {static_cast<int64_t>(std::llround(local_params))};
    st.units = {{0, 1}};
    StageCost::Described d;
    d.dp_exposed_ms = dp_ms;
    d.optimizer_ms = optimizer_ms;
    d.send_ms = p > 1 ? send : 0;
    d.in_flight_bytes = static_cast<int64_t>(fsdp_units + transient);
    d.activation_bytes = static_cast<int64_t>(last ? last_act : first_act);
    st.described = d;
    in.stages.push_back(std::move(st));
  }
  return in;
}

}  // namespace lockstep::planner
