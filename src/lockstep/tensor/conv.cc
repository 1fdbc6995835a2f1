// Conv2d over oneDNN convolution primitives.
//
// Layouts: the caller's buffers are plain (NCHW activations, OIHW weights). With
// `blocked` plans the primitives are created with format_tag::any and oneDNN picks its
// preferred (typically nChw8c / OIhw8i8o on AVX2) layouts; we reorder at the edges into
// buffers owned by the plan. Plain plans run directly on the caller's buffers.
//
// bf16 precision (precision.h): plans whose sources, weights and output gradients are bf16
// (the reorders at the edges round the caller's fp32 buffers, to nearest even) with fp32
// results, accumulation and bias; made on first use next to the fp32 plans.
//
// Conv + ReLU + 2x2 max pool (ForwardReluPool) pools straight from the blocked output and its
// backward writes the blocked output gradient (bf16 in a bf16 plan) the backward primitives
// read; with one compute thread it goes through the minibatch in chunks that keep that output
// in L2 (Impl::PoolChunkRows).
//
// Determinism: oneDNN's weight-gradient primitive splits the minibatch reduction over
// threads, and implementation choices depend on the thread count at creation. In
// deterministic mode we instead use a second plan created single-threaded for a fixed
// minibatch chunk (largest divisor of N that is <= 16, independent of the thread count),
// in plain layout; chunks run in parallel, each single-threaded, and weight-gradient
// partials are summed in chunk order.
#include "lockstep/tensor/conv.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "lockstep/tensor/bf16_ops.h"
#include "lockstep/tensor/check.h"
#include "lockstep/tensor/conv_plan.h"
#include "lockstep/tensor/dnnl_context.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/memory.h"
#include "lockstep/tensor/pool_blocked.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/simd_avx512.h"
#include "lockstep/tensor/tensor.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::tensor {

using namespace conv_detail;  // the plans and their runs (conv_plan.h)

struct Conv2d::Impl {
  Conv2dShape s;
  Layouts layouts{};
  Plan full;
  std::unique_ptr<Plan> det;                  // created on first use in deterministic mode
  std::unique_ptr<Plan> full_bf16, det_bf16;  // the same in bf16 precision (precision.h)
  std::unique_ptr<Plan> chunk, chunk_bf16;    // the fused pool's plans for part of the minibatch (FusedPlan)
  std::vector<float> dw_tmp, db_tmp;
  std::vector<float> conv_out;    // ForwardReluPool's full-resolution output (or its gradient) off the fused path
  std::vector<float> rounded[2];  // bf16 emulation: operands rounded through bf16

  // bf16 precision runs bf16 plans where oneDNN has bf16 kernels; elsewhere the fp32 plans
  // take operands rounded through bf16 (the same values, fp32 speed).
  static bool NativeBf16() { return ComputePrecision() == Precision::kBF16 && UseNativeBf16(); }

  Plan& Full() {
    if (!NativeBf16()) return full;
    if (!full_bf16) full_bf16 = std::make_unique<Plan>(MakePlan(s, s.N, layouts, /*bf16=*/true));
    return *full_bf16;
  }

  Plan& DetPlan() {
    const bool bf16 = NativeBf16();
    std::unique_ptr<Plan>& slot = bf16 ? det_bf16 : det;
    if (!slot) {
      int prev = omp_get_max_threads();
      omp_set_num_threads(1);  // implementation choice must not depend on the thread count
      slot = std::make_unique<Plan>(MakePlan(s, DeterministicChunk(s.N), Layouts{false, false, false}, bf16));
      slot->concurrent = bf16;
      omp_set_num_threads(prev);
    }
    return *slot;
  }

  // The full plan's weight and bias gradients added into dw, db (db nullable) through the
  // plan's scratch; returns the output gradient in the primitive's layout for backward-data.
  memory AddWeightGrads(Plan& p, float* dw, float* db, const float* dout, const float* inp,
                        const memory* ddst_ready = nullptr) {
    memory ddst = RunBackwardWeights(p, dw_tmp.data(), db_tmp.data(), dout, inp, ddst_ready);
    AddInPlace(dw, dw_tmp.data(), static_cast<int64_t>(dw_tmp.size()));
    if (db) AddInPlace(db, db_tmp.data(), s.OC);
    return ddst;
  }

  // The fused conv + relu + pool runs on a plan whose (fp32) output and both backward
  // primitives' output gradient (fp32, or bf16 in a bf16 plan) are one blocked layout: the
  // block size, else 0. bf16 gradients are written by the 16-channel AVX-512 kernel only.
  int FusedPoolBlock(const Plan& p) const {
    const int block = ActivationBlock(p.fwd_dst, p.dst_plain);
    const dt grad = p.bf16 ? dt::bf16 : dt::f32;
    if (block == 0 || ActivationBlock(p.bw_dst, p.dst_plain, grad) != block ||
        ActivationBlock(p.bd_dst, p.dst_plain, grad) != block)
      return 0;
    if (p.bf16 && (block != 16 || !internal::HasAvx512())) return 0;
    if (s.OC % block != 0 || s.OH() % 2 != 0 || s.OW() % 2 != 0) return 0;
    return block;
  }

  // Rows a call of the fused conv + relu + pool takes at a time: with one compute thread the
  // minibatch goes through in chunks whose blocked output fits in the core's L2, so the pool
  // reads the convolution's output (and its backward writes the gradient that the backward
  // primitives read) while cached, not from memory; the pool passes were ~17% of a one-thread
  // cnn-fashion step, stalled on those loads. A chunk is the largest divisor of the minibatch
  // that fits, at least 4 rows (below that the calls' overhead outweighs it); 0 for the whole
  // minibatch at once (several threads: oneDNN's split of a small chunk over them loses more
  // than the cache gains; measured with 2 threads, chunks of 8 rows: 0.79x).
  int64_t PoolChunkRows() const {
    if (ComputeThreads() != 1) return 0;
    static const int64_t l2 = [] {
      const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
      return v > 0 ? static_cast<int64_t>(v) : int64_t{1} << 20;
    }();
    const int64_t row_bytes = s.OC * s.OH() * s.OW() * static_cast<int64_t>(sizeof(float));
    for (int64_t rows = std::min(l2 / row_bytes, s.N - 1); rows >= 4; --rows)
      if (s.N % rows == 0) return rows;
    return 0;
  }

  // The plan the fused conv + relu + pool runs on (a chunk's, see PoolChunkRows, else the full
  // minibatch's; fp32, or bf16 where bf16 runs native), its block size in `block`, or null where
  // neither has the blocked layouts or the mode has no fused path (deterministic mode's plans
  // are plain; emulated bf16 rounds the operands of fp32 plans).
  Plan* FusedPlan(int* block) {
    if (DeterministicCompute()) return nullptr;
    const bool bf16 = NativeBf16();
    if (!bf16 && ComputePrecision() != Precision::kF32) return nullptr;
    Plan& whole = Full();
    std::unique_ptr<Plan>& part = bf16 ? chunk_bf16 : chunk;
    if (const int64_t rows = PoolChunkRows()) {
      if (!part || part->mb != rows) part = std::make_unique<Plan>(MakePlan(s, rows, layouts, bf16, &whole));
      if ((*block = FusedPoolBlock(*part)) != 0) return part.get();
    }
    return (*block = FusedPoolBlock(whole)) != 0 ? &whole : nullptr;
  }

  const float* Rounded(int which, const float* x, int64_t n) {
    if (ComputePrecision() != Precision::kBF16 || NativeBf16()) return x;
    rounded[which].resize(static_cast<size_t>(n));
    RoundThroughBf16(x, n, rounded[which].data(), n, 1, n);
    return rounded[which].data();
  }
};

Conv2d::Conv2d(int64_t N, int64_t IC, int64_t H, int64_t W, int64_t OC, int64_t KH, int64_t KW, int64_t stride,
               int64_t pad)
    : Conv2d(Conv2dShape{N, IC, H, W, OC, KH, KW, stride, pad}) {}

Conv2d::Conv2d(const Conv2dShape& s, Conv2dOptions options) : shape_(s), impl_(std::make_unique<Impl>()) {
  LS_CHECK(s.N > 0 && s.IC > 0 && s.H > 0 && s.W > 0 && s.OC > 0 && s.KH > 0 && s.KW > 0 && s.stride > 0 &&
           s.pad >= 0 && s.OH() > 0 && s.OW() > 0)
      << "Conv2d: bad shape N=" << s.N << " IC=" << s.IC << " H=" << s.H << " W=" << s.W << " OC=" << s.OC
      << " K=" << s.KH << "x" << s.KW << " stride=" << s.stride << " pad=" << s.pad;
  impl_->s = s;
  try {
    // Blocked layouts win for forward and backward-data on the CNN's shapes (64x1x28x28 and
    // 64x32x14x14, 3x3 pad 1), and for weights when IC >= 8. With IC = 1 (first layer) the
    // weight gradient depends on the ISA: on AVX2 the blocked one pays a source reorder
    // padded 8x and is ~1.7x slower than plain; oneDNN's avx512_core kernel keeps the source
    // plain and is 3x faster than the plain gemm-based one (DNNL_VERBOSE, one thread,
    // cnn-fashion on an AVX-512 EPYC: 2.8 -> 0.9 ms a step, plus a 0.9 ms reorder of its
    // output gradient).
    const bool b = options.blocked_layouts;
    const unsigned isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa()), want = dnnl_cpu_isa_avx512_core;
    const bool avx512 = (isa & want) == want;  // the ISA values are bit sets
    impl_->layouts = Layouts{b, b, b && (s.IC >= 8 || avx512)};
    impl_->full = MakePlan(s, s.N, impl_->layouts);
  } catch (const dnnl::error& e) {
    LS_CHECK(false) << "oneDNN could not create a convolution plan: " << e.what();
  }
  impl_->dw_tmp.resize(s.OC * s.IC * s.KH * s.KW);
  impl_->db_tmp.resize(s.OC);
}

Conv2d::~Conv2d() = default;
Conv2d::Conv2d(Conv2d&&) noexcept = default;
Conv2d& Conv2d::operator=(Conv2d&&) noexcept = default;

void Conv2d::Forward(float* out, const float* inp, const float* w, const float* b) {
  const Conv2dShape& s = shape_;
  inp = impl_->Rounded(0, inp, s.N * s.IC * s.H * s.W);
  w = impl_->Rounded(1, w, s.OC * s.IC * s.KH * s.KW);
  if (!DeterministicCompute()) return RunForward(impl_->Full(), out, inp, w, b);
  Plan& p = impl_->DetPlan();
  const int64_t chunks = s.N / p.mb, in_sz = p.mb * s.IC * s.H * s.W, out_sz = p.mb * s.OC * s.OH() * s.OW();
#pragma omp parallel for schedule(static) if (parallel : !omp_in_parallel())
  for (int64_t c = 0; c < chunks; ++c) {
    omp_set_num_threads(1);
    RunForward(p, out + c * out_sz, inp + c * in_sz, w, b);
  }
}

void Conv2d::BackwardData(float* dinp, const float* dout, const float* w) {
  const Conv2dShape& s = shape_;
  dout = impl_->Rounded(0, dout, s.N * s.OC * s.OH() * s.OW());
  w = impl_->Rounded(1, w, s.OC * s.IC * s.KH * s.KW);
  if (!DeterministicCompute()) return RunBackwardData(impl_->Full(), dinp, dout, w);
  Plan& p = impl_->DetPlan();
  const int64_t chunks = s.N / p.mb, in_sz = p.mb * s.IC * s.H * s.W, out_sz = p.mb * s.OC * s.OH() * s.OW();
#pragma omp parallel for schedule(static) if (parallel : !omp_in_parallel())
  for (int64_t c = 0; c < chunks; ++c) {
    omp_set_num_threads(1);
    RunBackwardData(p, dinp + c * in_sz, dout + c * out_sz, w);
  }
}

void Conv2d::Backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w) {
  // The shared reorder only where both primitives run on the full plan and read the output
  // gradient in one blocked layout; elsewhere the two calls as they are.
  const bool emulated_bf16 = ComputePrecision() == Precision::kBF16 && !UseNativeBf16();
  Plan* p = DeterministicCompute() || emulated_bf16 ? nullptr : &impl_->Full();
  if (p == nullptr || !p->bd_dst || !p->bw_dst || p->bd_dst.get_desc() != p->bw_dst.get_desc()) {
    BackwardWeights(dw, db, dout, inp);
    BackwardData(dinp, dout, w);
    return;
  }
  const memory ddst = impl_->AddWeightGrads(*p, dw, db, dout, inp);
  RunBackwardData(*p, dinp, dout, w, &ddst);
}

void Conv2d::ForwardReluPool(float* pooled, int32_t* argmax, const float* inp, const float* w, const float* b) {
  const Conv2dShape& s = shape_;
  int block = 0;
  if (Plan* p = impl_->FusedPlan(&block)) {
    const int64_t in_rows = s.IC * s.H * s.W, out_rows = s.OC * s.OH() * s.OW() / 4;
    for (int64_t r = 0; r < s.N; r += p->mb) {
      RunForward(*p, nullptr, inp + r * in_rows, w, b, /*keep_blocked=*/true);
      internal::ReluMaxPool2x2FromBlocked(pooled + r * out_rows, argmax + r * out_rows,
                                          static_cast<const float*>(p->fwd_dst.get_data_handle()), p->mb, s.OC, s.OH(),
                                          s.OW(), block);
    }
    return;
  }
  std::vector<float>& y = impl_->conv_out;
  y.resize(static_cast<size_t>(s.N * s.OC * s.OH() * s.OW()));
  Forward(y.data(), inp, w, b);
  ReluMaxPool2x2Forward(pooled, argmax, y.data(), s.N, s.OC, s.OH(), s.OW());
}

void Conv2d::BackwardReluPool(float* dinp, float* dw, float* db, const float* dpooled, const int32_t* argmax,
                              const float* pooled, const float* inp, const float* w) {
  const Conv2dShape& s = shape_;
  int block = 0;
  if (Plan* p = impl_->FusedPlan(&block)) {
    // Chunk by chunk (the forward's split or another: the pool's record is kept image by
    // image), the weight and bias gradients added in chunk order.
    const int64_t in_rows = s.IC * s.H * s.W, out_rows = s.OC * s.OH() * s.OW() / 4;
    const memory ddst = p->bw_dst;
    for (int64_t r = 0; r < s.N; r += p->mb) {
      const int64_t o = r * out_rows;
      if (p->bf16)
        internal::ReluMaxPool2x2BackwardToBlockedBf16(static_cast<uint16_t*>(ddst.get_data_handle()), argmax + o,
                                                      dpooled + o, p->mb, s.OC, s.OH(), s.OW());
      else
        internal::ReluMaxPool2x2BackwardToBlocked(static_cast<float*>(ddst.get_data_handle()), argmax + o, dpooled + o,
                                                  p->mb, s.OC, s.OH(), s.OW(), block);
      impl_->AddWeightGrads(*p, dw, db, nullptr, inp + r * in_rows, &ddst);
      if (dinp != nullptr) RunBackwardData(*p, dinp + r * in_rows, nullptr, w, &ddst);
    }
    return;
  }
  std::vector<float>& dy = impl_->conv_out;
  dy.resize(static_cast<size_t>(s.N * s.OC * s.OH() * s.OW()));
  ReluMaxPool2x2Backward(dy.data(), argmax, pooled, dpooled, s.N, s.OC, s.OH(), s.OW(), /*accumulate=*/false);
  if (dinp != nullptr)
    Backward(dinp, dw, db, dy.data(), inp, w);
  else
    BackwardWeights(dw, db, dy.data(), inp);
}

int64_t Conv2d::FusedChunkRows() {
  int block = 0;
  const Plan* p = impl_->FusedPlan(&block);
  return p != nullptr ? p->mb : shape_.N;
}

void Conv2d::BackwardWeights(float* dw, float* db, const float* dout, const float* inp) {
  const Conv2dShape& s = shape_;
  const int64_t wsz = s.OC * s.IC * s.KH * s.KW;
  dout = impl_->Rounded(0, dout, s.N * s.OC * s.OH() * s.OW());
  inp = impl_->Rounded(1, inp, s.N * s.IC * s.H * s.W);
  if (!DeterministicCompute()) {
    impl_->AddWeightGrads(impl_->Full(), dw, db, dout, inp);
    return;
  }
  Plan& p = impl_->DetPlan();
  const int64_t chunks = s.N / p.mb, in_sz = p.mb * s.IC * s.H * s.W, out_sz = p.mb * s.OC * s.OH() * s.OW();
  std::vector<float> part(chunks * (wsz + s.OC));
#pragma omp parallel for schedule(static) if (parallel : !omp_in_parallel())
  for (int64_t c = 0; c < chunks; ++c) {
    omp_set_num_threads(1);
    float* pw = part.data() + c * (wsz + s.OC);
    RunBackwardWeights(p, pw, pw + wsz, dout + c * out_sz, inp + c * in_sz);
  }
  for (int64_t c = 0; c < chunks; ++c) {  // fixed order
    const float* pw = part.data() + c * (wsz + s.OC);
    AddInPlace(dw, pw, wsz);
    if (db) AddInPlace(db, pw + wsz, s.OC);
  }
}

}  // namespace lockstep::tensor
