// The oneDNN side of Conv2d (conv.h): a plan holds the forward, backward-data and
// backward-weights primitives of one shape and minibatch, with the buffers they need in the
// layouts oneDNN chose, and runs them on the caller's plain (NCHW / OIHW) buffers. Internal to
// tensor/.
#pragma once

#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "lockstep/tensor/conv.h"
#include "lockstep/tensor/memory.h"
#include "lockstep/tensor/tensor.h"

namespace lockstep::tensor::conv_detail {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

struct Plan {
  int64_t mb = 0;
  // bf16 plans take bf16 sources and weights (rounded by the reorders that feed them) and
  // give fp32 results. A deterministic bf16 plan runs on several threads at once (one chunk
  // each), so its rounded inputs go to per-call buffers instead of the plan's.
  bool bf16 = false;
  bool concurrent = false;
  memory::desc src_plain, wei_plain, bias_plain, dst_plain;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_w;
  // Plan-owned buffers in the primitives' layouts (only used for blocked plans), over storage
  // counted in the memory tracker (MemoryTag::kWorkspace) that was current when the plan was made.
  memory fwd_src, fwd_wei, fwd_dst, bd_dst, bd_wei, bd_src, bw_src, bw_dst, bw_wei;
  std::vector<std::shared_ptr<Storage>> storage;
  std::vector<int> storage_role;  // of each storage: 0 source-, 1 output-, 2 weight-shaped
};

inline memory::dims Dims4(int64_t a, int64_t b, int64_t c, int64_t d) { return {a, b, c, d}; }

// Which primitives run on oneDNN-chosen (blocked) layouts.
struct Layouts {
  bool fwd, bwd_data, bwd_weights;
};

// `lender`: a plan of the same shape over at least mb rows whose buffers this one may use
// instead of allocating its own (MakePlan's comment in conv_plan.cc says why that is safe), so
// a chunk's plan (Conv2d::Impl::FusedPlan) adds no memory.
Plan MakePlan(const Conv2dShape& s, int64_t mb, Layouts blocked, bool bf16 = false, const Plan* lender = nullptr);

// A memory for `ptr` in `plain` layout, reordered into `owned` when the primitive wants a
// different layout (owned is null when it does not).
memory Input(memory owned, const memory::desc& plain, const void* ptr, bool concurrent = false);
memory Output(const memory& owned, const memory::desc& plain, void* ptr);
// Reorders `owned` (when there is one) into the caller's plain buffer.
void Finish(memory owned, const memory::desc& plain, void* ptr);

// keep_blocked: leave the result in the plan's blocked output buffer (p.fwd_dst) instead of
// reordering it into `out` (Conv2d::ForwardReluPool pools from there).
void RunForward(Plan& p, float* out, const float* inp, const float* w, const float* b, bool keep_blocked = false);
// ddst_ready: dout already in the primitive's layout (Conv2d::Backward), or null.
void RunBackwardData(Plan& p, float* dinp, const float* dout, const float* w, const memory* ddst_ready = nullptr);
// Writes (overwrites) the weight gradient (plain OIHW) to dw_out and the bias gradient to
// db_out. Uses plan buffers only for a blocked weight layout, so a plain plan can run
// concurrently on several threads with distinct outputs.
// Returns the output gradient in the primitive's layout (for RunBackwardData to reuse).
memory RunBackwardWeights(Plan& p, float* dw_out, float* db_out, const float* dout, const float* inp,
                          const memory* ddst_ready = nullptr);

// 16 or 8 when `m` holds the activation `plain` as `type` in oneDNN's nChw16c / nChw8c layout
// (what the pool kernels of pool_blocked.h read and write), else 0.
int ActivationBlock(const memory& m, const memory::desc& plain, dt type = dt::f32);

// The minibatch chunk of deterministic mode: the largest divisor of n that is at most 16.
int64_t DeterministicChunk(int64_t n);

}  // namespace lockstep::tensor::conv_detail
