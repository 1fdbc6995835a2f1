// Internal to tensor/: the register-blocked AVX2 micro-kernel behind attention.
//
//   C[r, c] = alpha * sum_{kk < K} A(r, kk) * B[kk * ldb + c]   (+ C[r, c] if accumulate)
//
// for r < rows (<= kRowBlock = 6), c < ncols; A(r, kk) = a[r * a_rs + kk * a_ks], so A can be
// read row-major (a_ks = 1) or transposed (a_rs = 1). Columns go in panels of 16 (two
// vectors), with masked loads/stores on the last panel, so B rows and C rows are never
// touched beyond ncols. Each C element is one fixed-order sum over kk: bits depend only
// on the inputs.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor::internal {

// 6 rows x 16 columns = 12 accumulators: enough independent FMA chains to cover the FMA
// latency on two pipes, with 2 B loads and 1 broadcast register (15 of 16 ymm).
inline constexpr int kRowBlock = 6;

template <int R, bool kMasked>
inline void MicroPanel(int64_t K, const float* a, int64_t a_rs, int64_t a_ks, const float* b, int64_t ldb, float* c,
                       int64_t ldc, float alpha, bool accumulate, __m256i m0, __m256i m1) {
  __m256 acc0[R], acc1[R];
  // Fully unrolled so the accumulator arrays live in registers (GCC keeps them on the
  // stack otherwise).
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < K; ++kk) {
    const float* brow = b + kk * ldb;
    __m256 b0 = kMasked ? _mm256_maskload_ps(brow, m0) : _mm256_loadu_ps(brow);
    __m256 b1 = kMasked ? _mm256_maskload_ps(brow + 8, m1) : _mm256_loadu_ps(brow + 8);
    const float* acol = a + kk * a_ks;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m256 av = _mm256_broadcast_ss(acol + r * a_rs);
      acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* crow = c + r * ldc;
    __m256 v0 = _mm256_mul_ps(acc0[r], va), v1 = _mm256_mul_ps(acc1[r], va);
    if (kMasked) {
      if (accumulate) {
        v0 = _mm256_add_ps(v0, _mm256_maskload_ps(crow, m0));
        v1 = _mm256_add_ps(v1, _mm256_maskload_ps(crow + 8, m1));
      }
      _mm256_maskstore_ps(crow, m0, v0);
      _mm256_maskstore_ps(crow + 8, m1, v1);
    } else {
      if (accumulate) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(crow));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(crow + 8));
      }
      _mm256_storeu_ps(crow, v0);
      _mm256_storeu_ps(crow + 8, v1);
    }
  }
}

template <int R>
inline void MicroRows(int64_t K, const float* a, int64_t a_rs, int64_t a_ks, const float* b, int64_t ldb, int64_t ncols,
                      float* c, int64_t ldc, float alpha, bool accumulate) {
  int64_t c0 = 0;
  for (; c0 + 16 <= ncols; c0 += 16) {
    MicroPanel<R, false>(K, a, a_rs, a_ks, b + c0, ldb, c + c0, ldc, alpha, accumulate, __m256i(), __m256i());
  }
  if (c0 < ncols) {
    const int64_t rem = ncols - c0;
    MicroPanel<R, true>(K, a, a_rs, a_ks, b + c0, ldb, c + c0, ldc, alpha, accumulate, TailMask(rem < 8 ? rem : 8),
                        TailMask(rem > 8 ? rem - 8 : 0));
  }
}

inline void MicroGemm(int rows, int64_t K, const float* a, int64_t a_rs, int64_t a_ks, const float* b, int64_t ldb,
                      int64_t ncols, float* c, int64_t ldc, float alpha, bool accumulate) {
  switch (rows) {
    case 6:
      MicroRows<6>(K, a, a_rs, a_ks, b, ldb, ncols, c, ldc, alpha, accumulate);
      break;
    case 5:
      MicroRows<5>(K, a, a_rs, a_ks, b, ldb, ncols, c, ldc, alpha, accumulate);
      break;
    case 4:
      MicroRows<4>(K, a, a_rs, a_ks, b, ldb, ncols, c, ldc, alpha, accumulate);
      break;
    case 3:
      MicroRows<3>(K, a, a_rs, a_ks, b, ldb, ncols, c, ldc, alpha, accumulate);
      break;
    case 2:
      MicroRows<2>(K, a, a_rs, a_ks, b, ldb, ncols, c, ldc, alpha, accumulate);
      break;
    case 1:
      MicroRows<1>(K, a, a_rs, a_ks, b, ldb, ncols, c, ldc, alpha, accumulate);
      break;
    default:
      break;
  }
}

}  // namespace lockstep::tensor::internal
