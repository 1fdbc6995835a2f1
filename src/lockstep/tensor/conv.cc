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
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/memory.h"
#include "lockstep/tensor/pool_blocked.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/simd_avx512.h"
#include "lockstep/tensor/tensor.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::tensor {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

dnnl::engine& Engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // thread-safe, shared
  return *e;
}

dnnl::stream& Stream() {
  thread_local dnnl::stream s(Engine());  // one stream per (rank or OpenMP) thread
  return s;
}

// Per-thread user scratchpad, grown on demand (primitives use scratchpad_mode::user, so
// concurrent execution of one primitive from several threads is safe).
void* Scratchpad(size_t bytes) {
  thread_local std::vector<float> buf;
  size_t n = (bytes + sizeof(float) - 1) / sizeof(float);
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

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

memory::dims Dims4(int64_t a, int64_t b, int64_t c, int64_t d) { return {a, b, c, d}; }

// Which primitives run on oneDNN-chosen (blocked) layouts.
struct Layouts {
  bool fwd, bwd_data, bwd_weights;
};

// `lender`: a plan of the same shape over at least mb rows whose buffers this one may use
// instead of allocating its own (MakePlan's comment below says why that is safe), so a chunk's
// plan (Impl::FusedPlan) adds no memory.
Plan MakePlan(const Conv2dShape& s, int64_t mb, Layouts blocked, bool bf16 = false, const Plan* lender = nullptr) {
  Plan p;
  p.mb = mb;
  p.bf16 = bf16;
  const int64_t OH = s.OH(), OW = s.OW();
  p.src_plain = memory::desc(Dims4(mb, s.IC, s.H, s.W), dt::f32, tag::nchw);
  p.wei_plain = memory::desc(Dims4(s.OC, s.IC, s.KH, s.KW), dt::f32, tag::oihw);
  p.bias_plain = memory::desc({s.OC}, dt::f32, tag::x);
  p.dst_plain = memory::desc(Dims4(mb, s.OC, OH, OW), dt::f32, tag::nchw);
  auto pick = [&](bool b, const memory::desc& plain) {
    return b ? memory::desc(plain.dims(), dt::f32, tag::any) : plain;
  };
  // bf16 operands: the primitive's source and weights (forward, backward-weights), its
  // output gradient and weights (backward-data); results and bias stay fp32.
  auto in = [&](bool b, const memory::desc& plain) {
    if (!bf16) return pick(b, plain);
    return b ? memory::desc(plain.dims(), dt::bf16, tag::any)
             : memory::desc(plain.dims(), dt::bf16, plain.dims().size() == 4 ? tag::nchw : tag::x);
  };
  const memory::dims strides = {s.stride, s.stride}, pad = {s.pad, s.pad};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto& eng = Engine();
  dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                     in(blocked.fwd, p.src_plain), in(blocked.fwd, p.wei_plain), p.bias_plain,
                                     pick(blocked.fwd, p.dst_plain), strides, pad, pad);
  p.fwd_pd = dnnl::convolution_forward::primitive_desc(fd, attr, eng);
  dnnl::convolution_backward_data::desc bdd(dnnl::algorithm::convolution_direct, pick(blocked.bwd_data, p.src_plain),
                                            in(blocked.bwd_data, p.wei_plain), in(blocked.bwd_data, p.dst_plain),
                                            strides, pad, pad);
  p.bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(bdd, attr, eng, p.fwd_pd);
  dnnl::convolution_backward_weights::desc bwd(
      dnnl::algorithm::convolution_direct, in(blocked.bwd_weights, p.src_plain), pick(blocked.bwd_weights, p.wei_plain),
      p.bias_plain, in(blocked.bwd_weights, p.dst_plain), strides, pad, pad);
  p.bwd_w_pd = dnnl::convolution_backward_weights::primitive_desc(bwd, attr, eng, p.fwd_pd);
  p.fwd = dnnl::convolution_forward(p.fwd_pd);
  p.bwd_data = dnnl::convolution_backward_data(p.bwd_data_pd);
  p.bwd_w = dnnl::convolution_backward_weights(p.bwd_w_pd);
  // A plan's buffers live only within one call: the forward's; or the backward's, which takes
  // the weight gradient before the data gradient (RunBackwardWeights then RunBackwardData), so
  // the source reordered for the first is dead when the second writes its input gradient. So
  // buffers of one role (source-shaped, output-shaped) with equal layouts are one buffer: the
  // output gradient's reorder and the forward's blocked output share memory, and so on. For the
  // same reason two plans used by one thread in turn may share buffers role by role (a lender's
  // buffer of the role, large enough, each lent once).
  std::vector<memory> roles[3];
  std::vector<bool> lent(lender ? lender->storage.size() : 0, false);
  auto own = [&](const memory::desc& d, const memory::desc& plain, int role) {
    if (d == plain) return memory();
    for (const memory& m : roles[role])
      if (m.get_desc() == d) return m;
    const size_t bytes = d.get_size();
    std::shared_ptr<Storage> storage;
    for (size_t i = 0; i < lent.size() && storage == nullptr; ++i)
      if (!lent[i] && lender->storage_role[i] == role && lender->storage[i]->bytes() >= bytes) {
        lent[i] = true;
        storage = lender->storage[i];
      }
    if (storage == nullptr) storage = Storage::Allocate(bytes, MemoryTag::kWorkspace);
    if (storage == nullptr) ExitIfLimitExceeded(bytes, MemoryTag::kWorkspace, "a convolution's blocked operand");
    LS_CHECK(storage != nullptr) << "cannot allocate " << bytes << " bytes for a convolution's blocked operand";
    p.storage.push_back(storage);
    p.storage_role.push_back(role);
    roles[role].emplace_back(d, eng, storage->data());
    return roles[role].back();
  };
  constexpr int kSrc = 0, kDst = 1, kWei = 2;
  p.fwd_src = own(p.fwd_pd.src_desc(), p.src_plain, kSrc);
  p.fwd_wei = own(p.fwd_pd.weights_desc(), p.wei_plain, kWei);
  p.fwd_dst = own(p.fwd_pd.dst_desc(), p.dst_plain, kDst);
  p.bd_dst = own(p.bwd_data_pd.diff_dst_desc(), p.dst_plain, kDst);
  p.bd_wei = own(p.bwd_data_pd.weights_desc(), p.wei_plain, kWei);
  p.bd_src = own(p.bwd_data_pd.diff_src_desc(), p.src_plain, kSrc);
  p.bw_src = own(p.bwd_w_pd.src_desc(), p.src_plain, kSrc);
  p.bw_dst = own(p.bwd_w_pd.diff_dst_desc(), p.dst_plain, kDst);
  p.bw_wei = own(p.bwd_w_pd.diff_weights_desc(), p.wei_plain, kWei);
  LS_CHECK(p.bwd_w_pd.diff_bias_desc() == p.bias_plain) << "oneDNN chose a blocked bias layout";
  return p;
}

// A memory for `ptr` in `plain` layout, reordered into `owned` when the primitive wants a
// different layout (owned is null when it does not).
memory Input(memory owned, const memory::desc& plain, const void* ptr, bool concurrent = false) {
  memory user(plain, Engine(), const_cast<void*>(ptr));
  if (!owned) return user;
  if (concurrent) owned = memory(owned.get_desc(), Engine());  // this call's own buffer
  dnnl::reorder(user, owned).execute(Stream(), user, owned);
  return owned;
}

memory Output(const memory& owned, const memory::desc& plain, void* ptr) {
  return owned ? owned : memory(plain, Engine(), ptr);
}

void Finish(memory owned, const memory::desc& plain, void* ptr) {
  if (!owned) return;
  memory user(plain, Engine(), ptr);
  dnnl::reorder(owned, user).execute(Stream(), owned, user);
}

memory ScratchMem(const dnnl::primitive_desc_base& pd) {
  memory::desc d = pd.scratchpad_desc();
  return memory(d, Engine(), Scratchpad(d.get_size()));
}

// keep_blocked: leave the result in the plan's blocked output buffer (p.fwd_dst) instead of
// reordering it into `out` (Conv2d::ForwardReluPool pools from there).
void RunForward(Plan& p, float* out, const float* inp, const float* w, const float* b, bool keep_blocked = false) {
  auto& st = Stream();
  memory src = Input(p.fwd_src, p.src_plain, inp, p.concurrent);
  memory wei = Input(p.fwd_wei, p.wei_plain, w, p.concurrent);
  memory dst = Output(p.fwd_dst, p.dst_plain, out);
  std::vector<float> zero_bias;
  if (b == nullptr) {
    zero_bias.assign(p.bias_plain.get_size() / sizeof(float), 0.0f);
    b = zero_bias.data();
  }
  memory bias(p.bias_plain, Engine(), const_cast<float*>(b));
  p.fwd.execute(st, {{DNNL_ARG_SRC, src},
                     {DNNL_ARG_WEIGHTS, wei},
                     {DNNL_ARG_BIAS, bias},
                     {DNNL_ARG_DST, dst},
                     {DNNL_ARG_SCRATCHPAD, ScratchMem(p.fwd_pd)}});
  if (!keep_blocked) Finish(p.fwd_dst, p.dst_plain, out);
  st.wait();
}

// ddst_ready: dout already in the primitive's layout (Conv2d::Backward), or null.
void RunBackwardData(Plan& p, float* dinp, const float* dout, const float* w, const memory* ddst_ready = nullptr) {
  auto& st = Stream();
  memory ddst = ddst_ready ? *ddst_ready : Input(p.bd_dst, p.dst_plain, dout, p.concurrent);
  memory wei = Input(p.bd_wei, p.wei_plain, w, p.concurrent);
  memory dsrc = Output(p.bd_src, p.src_plain, dinp);
  p.bwd_data.execute(st, {{DNNL_ARG_DIFF_DST, ddst},
                          {DNNL_ARG_WEIGHTS, wei},
                          {DNNL_ARG_DIFF_SRC, dsrc},
                          {DNNL_ARG_SCRATCHPAD, ScratchMem(p.bwd_data_pd)}});
  Finish(p.bd_src, p.src_plain, dinp);
  st.wait();
}

// Writes (overwrites) the weight gradient (plain OIHW) to dw_out and the bias gradient to
// db_out. Uses plan buffers only for a blocked weight layout, so a plain plan can run
// concurrently on several threads with distinct outputs.
// Returns the output gradient in the primitive's layout (for RunBackwardData to reuse).
memory RunBackwardWeights(Plan& p, float* dw_out, float* db_out, const float* dout, const float* inp,
                          const memory* ddst_ready = nullptr) {
  auto& st = Stream();
  memory src = Input(p.bw_src, p.src_plain, inp, p.concurrent);
  memory ddst = ddst_ready ? *ddst_ready : Input(p.bw_dst, p.dst_plain, dout, p.concurrent);
  memory dwei = Output(p.bw_wei, p.wei_plain, dw_out);
  memory dbias(p.bias_plain, Engine(), db_out);
  p.bwd_w.execute(st, {{DNNL_ARG_SRC, src},
                       {DNNL_ARG_DIFF_DST, ddst},
                       {DNNL_ARG_DIFF_WEIGHTS, dwei},
                       {DNNL_ARG_DIFF_BIAS, dbias},
                       {DNNL_ARG_SCRATCHPAD, ScratchMem(p.bwd_w_pd)}});
  Finish(p.bw_wei, p.wei_plain, dw_out);
  st.wait();
  return ddst;
}

// 16 or 8 when `m` holds the activation `plain` as `type` in oneDNN's nChw16c / nChw8c layout
// (what the pool kernels of pool_blocked.h read and write), else 0.
int ActivationBlock(const memory& m, const memory::desc& plain, dt type = dt::f32) {
  if (!m) return 0;
  const memory::desc d = m.get_desc();
  if (d == memory::desc(plain.dims(), type, tag::nChw16c)) return 16;
  if (d == memory::desc(plain.dims(), type, tag::nChw8c)) return 8;
  return 0;
}

int64_t DeterministicChunk(int64_t n) {
  for (int64_t c = std::min<int64_t>(n, 16); c > 1; --c)
    if (n % c == 0) return c;
  return 1;
}

}  // namespace

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
