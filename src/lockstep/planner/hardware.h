// `lockstep plan --hardware FILE`: plans for a described machine instead of measuring this one
// (docs/planning.md). The file (TOML) gives the devices and the links between them; the model
// shape comes from the config: a GPT as lockstep trains it, or a Llama-style shape for
// planning only (model.kind = "llama": RMSNorm, SwiGLU MLP of model.ffn_hidden, grouped-query
// attention with model.kv_heads, RoPE; untied head). Every stage cost is arithmetic over the
// shape and the file: compute from FLOPs at a matmul efficiency, non-matmul work from the bytes
// it moves at a memory efficiency, collectives from bandwidth and latency, activations from the
// formulas of Korthikanti et al. 2022. The stage costs go through the same step model as a
// measured profile's (PredictLayout), which counts the mixed-precision states and composes the
// step. Code: hardware.cc (the file and the shape), hardware_stage.cc (a layout's stage costs),
// hardware_plan.cc (the layouts, the plan).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/core/config.h"
#include "lockstep/planner/planner.h"

namespace lockstep::planner {

struct Link {
  double bandwidth_gbs = 0;  // per device and direction, GB/s (1e9 bytes)
  double latency_us = 0;
  double efficiency = 1;  // share of the bandwidth a large collective reaches
};

struct Hardware {
  std::string name;
  int devices_per_node = 1;
  double memory_gib = 0;
  double peak_tflops_bf16 = 0, peak_tflops_fp32 = 0;
  double matmul_efficiency = 1;     // share of peak a large GEMM reaches
  double attention_efficiency = 1;  // share of peak a fused (flash) attention kernel reaches
  // The same for its backward (optional in the file: the forward's share when absent).
  double attention_bwd_efficiency = 1;
  double memory_gbs = 0;         // HBM bandwidth
  double memory_efficiency = 1;  // share of it elementwise kernels reach
  Link intra, inter;
};

// InvalidArgument naming the file and the missing, mistyped or out-of-range field.
Result<Hardware> ReadHardware(const std::string& path);

// The shape of the model to plan (GPT or Llama-style), from [model].
struct ModelShape {
  bool llama = false;
  int64_t vocab = 0, context = 0, layers = 0, heads = 0, kv_heads = 0, width = 0, ffn = 0;
  int64_t LayerParams() const;      // one block
  int64_t EmbeddingParams() const;  // token (+ position for GPT) embeddings
  int64_t HeadParams() const;       // untied head (Llama); GPT ties it to the embedding
  int64_t TotalParams() const;
};
Result<ModelShape> ReadModelShape(const Config& config);

// A layout of `workers` devices on `hw` as the step model's input (StageCost::Described holds
// the terms of the frameworks a described machine stands for: Megatron's and FSDP's collectives,
// their units and activations, the optimizer's pass over the states in memory). The candidate
// gives dp, tp, pp, ZeRO, micro-batches and their rows, recompute and interleave; its stages'
// parameter layouts are not needed. `clips_gradients`: the recipe clips by the global norm
// (optim.grad_clip > 0). InvalidArgument for a layout that does not split the model.
Result<LayoutInput> DescribedLayoutInput(const Hardware& hw, const ModelShape& m, const Candidate& c, int workers,
                                         bool clips_gradients);

// Predicts every layout of `workers` devices on `hw` (DescribedLayoutInput, then PredictLayout)
// and decides, as RunPlan does for a measured profile.
Result<PlanResult> PlanForHardware(const Hardware& hw, const ModelShape& m, int64_t global_batch, int workers,
                                   int64_t mem_limit, bool clips_gradients);

// `lockstep plan --hardware FILE` (RunPlan's other branch): reads the config and the file, plans,
// prints the table (the best 40 rows) and writes plan.json (every row). Nothing is measured or
// cached.
Status RunHardwarePlan(const PlanOptions& options);

}  // namespace lockstep::planner
