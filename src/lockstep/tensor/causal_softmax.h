// Internal to tensor/: the row softmax of causal attention and its backward, in two builds.
//
// Row i of the score matrix has n = i + 1 live columns. Both builds give the same bits:
// exp is the same chain of operations per lane (Exp256 / Exp512), the max is exact in any
// order, and every sum runs in the AVX2 build's order (eight lanes, chunks of eight columns
// in column order, then one horizontal sum), the AVX-512 build adding the two halves of each
// 16-column vector one after the other. So a run's results do not depend on which build the
// processor picked, and the AVX-512 build does the exp and the stores at twice the width.
//
// Columns [n, end) are set to zero: the products that follow read a row up to the causal
// extent of its row block (end), not to T, so nothing past end is written (the rest of the
// upper triangle is never read; writing it was a memset of half the matrix).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "lockstep/tensor/simd_avx512.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor::internal {

// p[j] = softmax(p[0..n))[j] for j < n; p[j] = 0 for n <= j < end.
inline void CausalSoftmaxRow(float* p, int64_t n, int64_t end) {
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(p + j));
  float mx = HorizontalMax(vmax);
  for (; j < n; ++j) mx = std::max(mx, p[j]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vs = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 e = Exp256(_mm256_sub_ps(_mm256_loadu_ps(p + j), vm));
    _mm256_storeu_ps(p + j, e);
    vs = _mm256_add_ps(vs, e);
  }
  if (j < n) {
    __m256i mask = TailMask(n - j);
    __m256 e = Exp256(_mm256_sub_ps(_mm256_maskload_ps(p + j, mask), vm));
    e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(p + j, mask, e);
    vs = _mm256_add_ps(vs, e);
  }
  const __m256 vinv = _mm256_set1_ps(1.0f / HorizontalSum(vs));
  j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(p + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), vinv));
  if (j < n) {
    __m256i mask = TailMask(n - j);
    _mm256_maskstore_ps(p + j, mask, _mm256_mul_ps(_mm256_maskload_ps(p + j, mask), vinv));
  }
  std::fill(p + n, p + std::max(n, end), 0.0f);
}

// (GCC 12's false -Wmaybe-uninitialized on the AVX-512 intrinsics: see simd_avx512.h.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The high eight lanes (AVX512F's extract; extractf32x8 would need AVX512DQ).
__attribute__((target("avx512f"))) inline __m256 High8(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// The first min(n, 16) lanes.
__attribute__((target("avx512f"))) inline __mmask16 Lanes16(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1u);
}

__attribute__((target("avx512f"))) inline void CausalSoftmaxRow512(float* p, int64_t n, int64_t end) {
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(p + j));
  if (j < n) vmax = _mm512_mask_max_ps(vmax, Lanes16(n - j), vmax, _mm512_maskz_loadu_ps(Lanes16(n - j), p + j));
  const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m256 vs = _mm256_setzero_ps();
  for (j = 0; j < n; j += 16) {
    const __mmask16 m = Lanes16(n - j);
    const __m512 e = _mm512_maskz_mov_ps(m, Exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + j), vm)));
    _mm512_mask_storeu_ps(p + j, m, e);
    // Two eight-column chunks in column order, as the AVX2 build adds them (a chunk of
    // masked-off zeros adds nothing: the sum of exps is never -0).
    vs = _mm256_add_ps(vs, _mm512_castps512_ps256(e));
    vs = _mm256_add_ps(vs, High8(e));
  }
  const __m512 vinv = _mm512_set1_ps(1.0f / HorizontalSum(vs));
  for (j = 0; j < n; j += 16) {
    const __mmask16 m = Lanes16(n - j);
    _mm512_mask_storeu_ps(p + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + j), vinv));
  }
  for (j = n; j < end; j += 16) _mm512_mask_storeu_ps(p + j, Lanes16(end - j), _mm512_setzero_ps());
}

// ds[j] = p[j] * (ds[j] - sum_k p[k] ds[k]) * scale for j < n (ds holds dP on entry);
// ds[j] = 0 for n <= j < end.
inline void CausalSoftmaxBackwardRow(float* ds, const float* p, int64_t n, int64_t end, float scale) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(p + j), _mm256_loadu_ps(ds + j), acc);
  if (j < n) {
    const __m256i mask = TailMask(n - j);
    acc = _mm256_fmadd_ps(_mm256_maskload_ps(p + j, mask), _mm256_maskload_ps(ds + j, mask), acc);
  }
  const __m256 vdot = _mm256_set1_ps(HorizontalSum(acc)), vscale = _mm256_set1_ps(scale);
  j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(ds + j), vdot);
    _mm256_storeu_ps(ds + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + j), d), vscale));
  }
  if (j < n) {
    const __m256i mask = TailMask(n - j);
    const __m256 d = _mm256_sub_ps(_mm256_maskload_ps(ds + j, mask), vdot);
    _mm256_maskstore_ps(ds + j, mask, _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(p + j, mask), d), vscale));
  }
  std::fill(ds + n, ds + std::max(n, end), 0.0f);
}

__attribute__((target("avx512f"))) inline void CausalSoftmaxBackwardRow512(float* ds, const float* p, int64_t n,
                                                                           int64_t end, float scale) {
  __m256 acc = _mm256_setzero_ps();  // the AVX2 build's eight-lane chain, in its order
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = Lanes16(n - j);
    const __m512 pv = _mm512_maskz_loadu_ps(m, p + j), dv = _mm512_maskz_loadu_ps(m, ds + j);
    acc = _mm256_fmadd_ps(_mm512_castps512_ps256(pv), _mm512_castps512_ps256(dv), acc);
    // (when the high half is all masked off this adds +0 * +0: no change)
    acc = _mm256_fmadd_ps(High8(pv), High8(dv), acc);
  }
  const __m512 vdot = _mm512_set1_ps(HorizontalSum(acc)), vscale = _mm512_set1_ps(scale);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = Lanes16(n - j);
    const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, ds + j), vdot);
    _mm512_mask_storeu_ps(ds + j, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + j), d), vscale));
  }
  for (int64_t j = n; j < end; j += 16) _mm512_mask_storeu_ps(ds + j, Lanes16(end - j), _mm512_setzero_ps());
}

#pragma GCC diagnostic pop

}  // namespace lockstep::tensor::internal
