// Elementwise kernels and fixed-order reductions.
#include <immintrin.h>

#include <cmath>
#include <vector>

#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/simd_avx512.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor {
namespace {

using internal::Exp256;
using internal::WorthParallel;

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

// gelu(x) = 0.5 x (1 + tanh(u)), u = k (x + a x^3). Using 1 + tanh(u) = 2 sigmoid(2u),
// gelu(x) = x sigmoid(2u) = x / (1 + exp(-2u)): no cancellation for large negative x, and
// exp's ~2 ulp error is the only approximation. The sigmoid is one division shared by the
// value and the derivative (a division costs as much as the rest of the polynomial here).
struct GeluTerms {
  __m256 x2, e, s;  // x^2, exp(-2u), sigmoid(2u) = 1 / (1 + exp(-2u))
};

inline GeluTerms GeluCommon(__m256 x) {
  __m256 x2 = _mm256_mul_ps(x, x);
  __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(kGeluA), x2), x, x);
  __m256 e = Exp256(_mm256_mul_ps(_mm256_set1_ps(-2.0f * kGeluK), inner));
  return {x2, e, _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e))};
}

inline __m256 GeluOf(__m256 x, const GeluTerms& t) { return _mm256_mul_ps(x, t.s); }

// d/dx gelu = s + x s (1 - s) 2k (1 + 3a x^2), s = sigmoid(2u).
inline __m256 GeluGradOf(__m256 x, const GeluTerms& t) {
  __m256 du = _mm256_fmadd_ps(_mm256_set1_ps(2.0f * kGeluK * 3.0f * kGeluA), t.x2, _mm256_set1_ps(2.0f * kGeluK));
  __m256 s1 = _mm256_mul_ps(_mm256_mul_ps(t.s, t.s), t.e);  // s (1 - s) without cancellation
  return _mm256_fmadd_ps(_mm256_mul_ps(x, s1), du, t.s);
}

// The same three steps on 16 lanes (BiasGelu's AVX-512 build): per lane the same operations in
// the same order, so the same bits as the eight-lane build.
struct GeluTerms512 {
  __m512 x2, e, s;
};

#pragma GCC diagnostic push  // GCC 12's false positive on the AVX-512 intrinsics (simd_avx512.h)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) inline GeluTerms512 GeluCommon512(__m512 x) {
  __m512 x2 = _mm512_mul_ps(x, x);
  __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(kGeluA), x2), x, x);
  __m512 e = internal::Exp512(_mm512_mul_ps(_mm512_set1_ps(-2.0f * kGeluK), inner));
  return {x2, e, _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e))};
}

__attribute__((target("avx512f"))) inline __m512 GeluGradOf512(__m512 x, const GeluTerms512& t) {
  __m512 du = _mm512_fmadd_ps(_mm512_set1_ps(2.0f * kGeluK * 3.0f * kGeluA), t.x2, _mm512_set1_ps(2.0f * kGeluK));
  __m512 s1 = _mm512_mul_ps(_mm512_mul_ps(t.s, t.s), t.e);
  return _mm512_fmadd_ps(_mm512_mul_ps(x, s1), du, t.s);
}

// BiasGelu's rows [r0, r1) on 16 lanes, the tail of each row masked.
__attribute__((target("avx512f"))) void BiasGeluRows512(float* out, float* z, const float* bias, int64_t r0, int64_t r1,
                                                        int64_t cols, bool keep_grad) {
  for (int64_t r = r0; r < r1; ++r) {
    float* o = out + r * cols;
    float* zr = z + r * cols;
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 m = static_cast<__mmask16>(cols - j >= 16 ? 0xffff : (1u << (cols - j)) - 1u);
      __m512 x = _mm512_maskz_loadu_ps(m, zr + j);
      if (bias != nullptr) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias + j));
      const GeluTerms512 t = GeluCommon512(x);
      _mm512_mask_storeu_ps(o + j, m, _mm512_mul_ps(x, t.s));
      if (keep_grad) _mm512_mask_storeu_ps(zr + j, m, GeluGradOf512(x, t));
    }
  }
}
#pragma GCC diagnostic pop

inline __m256 GeluVec(__m256 x) { return GeluOf(x, GeluCommon(x)); }
inline __m256 GeluGradVec(__m256 x) { return GeluGradOf(x, GeluCommon(x)); }

template <typename VecFn>
void MapUnary(float* out, const float* inp, int64_t n, VecFn fn) {
  int64_t nv = n / 8 * 8;
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(n * 8))
  for (int64_t i = 0; i < nv; i += 8) _mm256_storeu_ps(out + i, fn(_mm256_loadu_ps(inp + i)));
  if (nv < n) {
    __m256i m = internal::TailMask(n - nv);
    __m256 x = _mm256_maskload_ps(inp + nv, m);
    _mm256_maskstore_ps(out + nv, m, fn(x));
  }
}

// Fixed-size chunks for the double reductions: the chunking (and so the bits) is the same
// for any thread count.
constexpr int64_t kReduceChunk = 1 << 14;

template <bool kSquare>
double ChunkSum(const float* a, int64_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 4; ++j) {
      __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(a + i + 4 * j));
      acc[j] = kSquare ? _mm256_fmadd_pd(v, v, acc[j]) : _mm256_add_pd(acc[j], v);
    }
  }
  __m256d s = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, s);
  double r = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) r += kSquare ? static_cast<double>(a[i]) * a[i] : static_cast<double>(a[i]);
  return r;
}

template <bool kSquare>
double FixedOrderSum(const float* a, int64_t n) {
  int64_t nchunks = (n + kReduceChunk - 1) / kReduceChunk;
  if (nchunks <= 1) return ChunkSum<kSquare>(a, n);
  std::vector<double> part(nchunks);
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(n))
  for (int64_t c = 0; c < nchunks; ++c) {
    int64_t b = c * kReduceChunk;
    part[c] = ChunkSum<kSquare>(a + b, std::min(kReduceChunk, n - b));
  }
  double r = 0;
  for (double p : part) r += p;
  return r;
}

// dinp (+)= deriv(src) * dout, 8 lanes at a time. The accumulating form spells the fused
// multiply-add out: with GNU C++'s default -ffp-contract=fast the compiler fuses
// `dinp + a * b` anyway, and one explicit loop for GeluBackward and MulGrad keeps them on the
// same bits whatever the flags. `work` per element sizes the OpenMP team.
template <typename DerivFn>
void ChainRule(float* dinp, const float* src, const float* dout, int64_t n, bool accumulate, int64_t work,
               DerivFn deriv) {
  int64_t nv = n / 8 * 8;
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(n * work))
  for (int64_t i = 0; i < nv; i += 8) {
    __m256 d = deriv(_mm256_loadu_ps(src + i)), g = _mm256_loadu_ps(dout + i);
    _mm256_storeu_ps(dinp + i, accumulate ? _mm256_fmadd_ps(d, g, _mm256_loadu_ps(dinp + i)) : _mm256_mul_ps(d, g));
  }
  if (nv < n) {
    __m256i m = internal::TailMask(n - nv);
    __m256 d = deriv(_mm256_maskload_ps(src + nv, m)), g = _mm256_maskload_ps(dout + nv, m);
    _mm256_maskstore_ps(dinp + nv, m,
                        accumulate ? _mm256_fmadd_ps(d, g, _mm256_maskload_ps(dinp + nv, m)) : _mm256_mul_ps(d, g));
  }
}

}  // namespace

void GeluForward(float* out, const float* inp, int64_t n) { MapUnary(out, inp, n, GeluVec); }

void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n, bool accumulate) {
  ChainRule(dinp, inp, dout, n, accumulate, 8, [](__m256 x) { return GeluGradVec(x); });
}

void BiasGelu(float* out, float* z, const float* bias, int64_t rows, int64_t cols, bool keep_grad) {
  if (internal::HasAvx512()) {
    // The division dominates this pass (one vdivps a vector): twice the lanes a division.
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(rows * cols * 8))
    for (int64_t r = 0; r < rows; ++r) BiasGeluRows512(out, z, bias, r, r + 1, cols, keep_grad);
    return;
  }
  const int64_t cv = cols / 8 * 8;
  const __m256i tail = internal::TailMask(cols - cv);
  // One row's columns [j, j + 8), or its masked tail: add the bias, write gelu and gelu'.
  auto vec = [&](float* o, float* zr, int64_t j, bool masked) {
    __m256 x = masked ? _mm256_maskload_ps(zr + j, tail) : _mm256_loadu_ps(zr + j);
    if (bias != nullptr) x = _mm256_add_ps(x, masked ? _mm256_maskload_ps(bias + j, tail) : _mm256_loadu_ps(bias + j));
    GeluTerms t = GeluCommon(x);
    if (masked) {
      _mm256_maskstore_ps(o + j, tail, GeluOf(x, t));
      if (keep_grad) _mm256_maskstore_ps(zr + j, tail, GeluGradOf(x, t));
    } else {
      _mm256_storeu_ps(o + j, GeluOf(x, t));
      if (keep_grad) _mm256_storeu_ps(zr + j, GeluGradOf(x, t));
    }
  };
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(rows * cols * 8))
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cv; j += 8) vec(out + r * cols, z + r * cols, j, false);
    if (cv < cols) vec(out + r * cols, z + r * cols, cv, true);
  }
}

void MulGrad(float* dinp, const float* grad, const float* dout, int64_t n, bool accumulate) {
  ChainRule(dinp, grad, dout, n, accumulate, 1, [](__m256 d) { return d; });
}

void ReluForward(float* out, const float* inp, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : WorthParallel(n))
  for (int64_t i = 0; i < n; ++i) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void ReluBackward(float* dinp, const float* out, const float* dout, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : WorthParallel(n))
  for (int64_t i = 0; i < n; ++i) dinp[i] += out[i] > 0.0f ? dout[i] : 0.0f;
}

void Add(float* out, const float* a, const float* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : WorthParallel(n))
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void AddInPlace(float* a, const float* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : WorthParallel(n))
  for (int64_t i = 0; i < n; ++i) a[i] += b[i];
}

void Scale(float* a, float s, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : WorthParallel(n))
  for (int64_t i = 0; i < n; ++i) a[i] *= s;
}

void Axpy(float* out, float s, const float* a, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : WorthParallel(n))
  for (int64_t i = 0; i < n; ++i) out[i] = __builtin_fmaf(s, a[i], out[i]);  // same bits in body and tail
}

double SumSquares(const float* a, int64_t n) { return FixedOrderSum<true>(a, n); }
double Sum(const float* a, int64_t n) { return FixedOrderSum<false>(a, n); }

}  // namespace lockstep::tensor
