// bf16 GEMM through oneDNN's matmul primitive (bf16 src and weights, fp32 dst, fp32
// accumulation), and the rounding that feeds it.
//
// Primitives are cached by shape, leading dimensions, alpha, beta and thread count (oneDNN
// fixes its work split when a primitive is created); creation costs tens of microseconds,
// a GPT step runs the same few shapes every time. They use a user scratchpad (one per
// thread), so one primitive may run on several threads at once.
//
// Determinism: like dnnl_sgemm, the matmul may split K over threads. In deterministic mode
// the output is cut into fixed tiles (from M and N only) and every tile runs single-threaded
// over the full K with a primitive created single-threaded, so a tile's bits depend on its
// own data and shape only, whatever the thread count.
#include <omp.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "lockstep/core/bf16.h"
#include "lockstep/tensor/bf16_ops.h"
#include "lockstep/tensor/check.h"
#include "lockstep/tensor/dnnl_context.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/simd_math.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::tensor {
namespace {

using dnnl::memory;

struct Key {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  int threads;
  auto Tie() const { return std::tie(ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, threads); }
  bool operator<(const Key& o) const { return Tie() < o.Tie(); }
};

struct Entry {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  memory::desc a, b, c, scratch;
};

std::shared_ptr<const Entry> MakeEntry(const Key& k) {
  auto e = std::make_shared<Entry>();
  using dt = memory::data_type;
  e->a = memory::desc({k.M, k.K}, dt::bf16, k.ta ? memory::dims{1, k.lda} : memory::dims{k.lda, 1});
  e->b = memory::desc({k.K, k.N}, dt::bf16, k.tb ? memory::dims{1, k.ldb} : memory::dims{k.ldb, 1});
  e->c = memory::desc({k.M, k.N}, dt::f32, memory::dims{k.ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.alpha != 1.0f) attr.set_output_scales(0, {k.alpha});
  if (k.beta != 0.0f) {
    dnnl::post_ops po;
    po.append_sum(k.beta);
    attr.set_post_ops(po);
  }
  try {
    e->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(e->a, e->b, e->c), attr, DnnlEngine());
    e->prim = dnnl::matmul(e->pd);
  } catch (const dnnl::error& err) {
    LS_CHECK(false) << "oneDNN could not create a bf16 matmul M=" << k.M << " N=" << k.N << " K=" << k.K << ": "
                    << err.what();
  }
  e->scratch = e->pd.scratchpad_desc();
  return e;
}

std::shared_ptr<const Entry> Primitive(const Key& k) {
  static std::mutex mu;
  static auto* cache = new std::map<Key, std::shared_ptr<const Entry>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(k);
  if (it != cache->end()) return it->second;
  // Shapes that change every call (generation grows the sequence) must not grow the cache
  // without bound; a training step uses a few dozen.
  if (cache->size() >= 1024) cache->clear();
  return cache->emplace(k, MakeEntry(k)).first->second;
}

void RunMatmul(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const Key key{ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, omp_get_max_threads()};
  std::shared_ptr<const Entry> e = Primitive(key);
  dnnl::engine& eng = DnnlEngine();
  memory a(e->a, eng, const_cast<uint16_t*>(A)), b(e->b, eng, const_cast<uint16_t*>(B)), c(e->c, eng, C);
  memory scratch(e->scratch, eng, DnnlScratchpad(e->scratch.get_size()));
  dnnl::stream& st = DnnlStream();
  e->prim.execute(st, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratch}});
  st.wait();
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// At most 8 tiles of about 256 rows (or strips of >= 256 columns), from M and N only: enough
// for a few threads and large enough for the bf16 kernels (the fp32 Gemm's rule).
struct Tiling {
  int64_t tm, tn, mtiles, ntiles;
};
Tiling ChooseTiling(int64_t M, int64_t N) {
  Tiling t;
  t.mtiles = std::clamp<int64_t>(CeilDiv(M, 256), 1, 8);
  t.ntiles = std::clamp<int64_t>(8 / t.mtiles, 1, std::max<int64_t>(1, CeilDiv(N, 256)));
  t.tm = std::min(M, CeilDiv(CeilDiv(M, t.mtiles), 16) * 16);
  t.tn = std::min(N, CeilDiv(CeilDiv(N, t.ntiles), 16) * 16);
  t.mtiles = CeilDiv(M, t.tm);
  t.ntiles = CeilDiv(N, t.tn);
  return t;
}

void RunTile(const Tiling& t, int64_t i, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
             const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int64_t m0 = (i / t.ntiles) * t.tm, n0 = (i % t.ntiles) * t.tn;
  const uint16_t* a = ta ? A + m0 : A + m0 * lda;
  const uint16_t* b = tb ? B + n0 * ldb : B + n0;
  RunMatmul(ta, tb, std::min(t.tm, M - m0), std::min(t.tn, N - n0), K, alpha, a, lda, b, ldb, beta, C + m0 * ldc + n0,
            ldc);
}

thread_local const Bf16WeightCopy* tls_weights = nullptr;

// Per-thread buffers for the rounded operands (workspace; grown to the largest operand).
template <typename T>
T* OperandScratch(int which, int64_t n) {
  thread_local std::vector<T> buf[3];
  if (static_cast<int64_t>(buf[which].size()) < n) buf[which].resize(n);
  return buf[which].data();
}

// The rounding passes split contiguous runs of elements over threads; each element is
// rounded alone, so the split never changes a bit.
template <typename Fn>
void ForRuns(int64_t rows, int64_t cols, bool flat, Fn fn) {
  if (flat) {  // one contiguous range: chunks of it
    const int64_t n = rows * cols, chunk = 1 << 16, chunks = CeilDiv(n, chunk);
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(n) && !omp_in_parallel())
    for (int64_t c = 0; c < chunks; ++c) fn(c * chunk, 0, std::min(chunk, n - c * chunk));
    return;
  }
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(rows * cols) && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) fn(0, r, cols);
}

}  // namespace

void RoundToBf16(const float* in, int64_t ld_in, uint16_t* out, int64_t ld_out, int64_t rows, int64_t cols) {
  ForRuns(rows, cols, ld_in == cols && ld_out == cols, [&](int64_t off, int64_t r, int64_t n) {
    F32ToBf16(in + off + r * ld_in, out + off + r * ld_out, static_cast<size_t>(n));
  });
}

void RoundThroughBf16(const float* in, int64_t ld_in, float* out, int64_t ld_out, int64_t rows, int64_t cols) {
  ForRuns(rows, cols, ld_in == cols && ld_out == cols, [&](int64_t off, int64_t r, int64_t n) {
    const float* src = in + off + r * ld_in;
    float* dst = out + off + r * ld_out;
    uint16_t tmp[256];
    for (int64_t j = 0; j < n; j += 256) {
      const size_t m = static_cast<size_t>(std::min<int64_t>(256, n - j));
      F32ToBf16(src + j, tmp, m);
      Bf16ToF32(tmp, dst + j, m);
    }
  });
}

void GemmBf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t lda,
              const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  LS_CHECK(M >= 0 && N >= 0 && K >= 0) << "GemmBf16 M=" << M << " N=" << N << " K=" << K;
  LS_CHECK(UseNativeBf16()) << "GemmBf16 without bf16 kernels on this processor";
  if (M == 0 || N == 0) return;
  if (K == 0) {  // the matmul wants K >= 1: C = beta * C
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  if (!DeterministicCompute()) return RunMatmul(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  const Tiling t = ChooseTiling(M, N);
  const int64_t ntiles = t.mtiles * t.ntiles;
  if (omp_in_parallel() || omp_get_max_threads() == 1 || ntiles == 1) {
    const int prev = omp_get_max_threads();
    omp_set_num_threads(1);
    for (int64_t i = 0; i < ntiles; ++i) RunTile(t, i, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    omp_set_num_threads(prev);
    return;
  }
#pragma omp parallel
  {
    omp_set_num_threads(1);  // this implicit task only: each tile runs single-threaded
#pragma omp for schedule(static)
    for (int64_t i = 0; i < ntiles; ++i) RunTile(t, i, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

void Bf16WeightCopy::Refresh(const float* src, int64_t n) {
  uint16_t* out = RefreshInPlace(src, n);
  RoundToBf16(src, n, out, n, 1, n);
}

uint16_t* Bf16WeightCopy::RefreshInPlace(const float* src, int64_t n) {
  LS_CHECK(src != nullptr && n >= 0) << "Bf16WeightCopy::Refresh of " << n << " elements";
  if (!copy_.defined() || copy_.numel() != n) copy_ = Tensor::Empty({n}, DType::kBF16, MemoryTag::kParameterCopy);
  src_ = src;
  n_ = n;
  return copy_.data<uint16_t>();
}

const uint16_t* Bf16WeightCopy::Find(const float* p, int64_t extent) const {
  if (src_ == nullptr) return nullptr;
  const auto lo = reinterpret_cast<uintptr_t>(src_), hi = lo + static_cast<uintptr_t>(n_) * sizeof(float);
  const auto at = reinterpret_cast<uintptr_t>(p);
  if (at < lo || at + static_cast<uintptr_t>(extent) * sizeof(float) > hi) return nullptr;
  return copy_.data<uint16_t>() + (p - src_);
}

void Bf16WeightCopy::Release() {
  copy_ = Tensor();
  src_ = nullptr;
  n_ = 0;
}

ScopedBf16Weights::ScopedBf16Weights(const Bf16WeightCopy* copy) : prev_(tls_weights) { tls_weights = copy; }
ScopedBf16Weights::~ScopedBf16Weights() { tls_weights = prev_; }
const Bf16WeightCopy* CurrentBf16Weights() { return tls_weights; }

namespace {

// A GEMM operand (rows x cols, row stride ld) in bf16: found in the installed weight copy, or
// rounded into the thread's scratch slot `which`.
const uint16_t* Bf16Operand(int which, const float* x, int64_t ld, int64_t rows, int64_t cols, int64_t* ld_out) {
  if (rows == 0 || cols == 0) {
    *ld_out = std::max<int64_t>(1, cols);
    return OperandScratch<uint16_t>(which, 1);
  }
  if (const Bf16WeightCopy* w = tls_weights) {
    if (const uint16_t* found = w->Find(x, (rows - 1) * ld + cols)) {
      *ld_out = ld;
      return found;
    }
  }
  uint16_t* out = OperandScratch<uint16_t>(which, rows * cols);
  RoundToBf16(x, ld, out, cols, rows, cols);
  *ld_out = cols;
  return out;
}

}  // namespace

namespace internal {

bool LinearBackwardBf16(float* dinp, float dinp_beta, float* dweight, const float* dout, const float* inp,
                        const float* weight, int64_t n, int64_t ic, int64_t oc) {
  if (ComputePrecision() != Precision::kBF16 || !UseNativeBf16() || dinp == nullptr || dweight == nullptr || n == 0 ||
      ic == 0 || oc == 0)
    return false;
  // The same roundings and products as the two Gemm calls of LinearBackward, with dout
  // rounded once (slot 2) instead of once per product.
  uint16_t* d16 = OperandScratch<uint16_t>(2, n * oc);
  RoundToBf16(dout, oc, d16, oc, n, oc);
  int64_t ld = 0;
  const uint16_t* w16 = Bf16Operand(1, weight, ic, oc, ic, &ld);
  GemmBf16(false, false, n, ic, oc, 1.0f, d16, oc, w16, ld, dinp_beta, dinp, ic);  // dinp = b dinp + dout . W
  const uint16_t* x16 = Bf16Operand(1, inp, ic, n, ic, &ld);
  GemmBf16(true, false, oc, ic, n, 1.0f, d16, oc, x16, ld, 1.0f, dweight, ic);  // dW += dout^T . inp
  return true;
}

void GemmRoundedBf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                     int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  // Stored shapes of the operands (rows x cols with leading dimension ld).
  const int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
  const int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
  if (!UseNativeBf16()) {
    float* a = OperandScratch<float>(0, a_rows * a_cols);
    float* b = OperandScratch<float>(1, b_rows * b_cols);
    RoundThroughBf16(A, lda, a, a_cols, a_rows, a_cols);
    RoundThroughBf16(B, ldb, b, b_cols, b_rows, b_cols);
    ScopedPrecision fp32(Precision::kF32);
    Gemm(trans_a, trans_b, M, N, K, alpha, a, std::max<int64_t>(1, a_cols), b, std::max<int64_t>(1, b_cols), beta, C,
         ldc);
    return;
  }
  int64_t a_ld = 0, b_ld = 0;
  const uint16_t* a = Bf16Operand(0, A, lda, a_rows, a_cols, &a_ld);
  const uint16_t* b = Bf16Operand(1, B, ldb, b_rows, b_cols, &b_ld);
  GemmBf16(trans_a, trans_b, M, N, K, alpha, a, a_ld, b, b_ld, beta, C, ldc);
}

}  // namespace internal

}  // namespace lockstep::tensor
