// Internal to tensor/: the register-blocked AVX2 micro-kernel behind attention.
//
//   C[r, c] = alpha * sum_{kk < K} A(r, kk) * B[kk * ldb + c]   (+ C[r, c] if accumulate, one FMA)
//
// for r < rows (<= kRowBlock = 6), c < ncols; A(r, kk) = a[r * a_rs + kk * a_ks], so A can be
// read row-major (a_ks = 1) or transposed (a_rs = 1). Columns go in panels of 16 (two
// vectors), with masked loads/stores on the last panel, so B rows and C rows are never
// touched beyond ncols. Each C element is one fixed-order sum over kk: bits depend only
// on the inputs.
//
// Two builds of the same kernel: AVX2 (the binary's x86-64-v3 floor) and AVX-512 (panels of
// 32 columns, chosen at run time where the processor has it; on processors with a full
// 512-bit datapath it does twice the multiply-adds per cycle). Every C element goes through
// the same chain of FMAs in the same order in both, so they give the same bits: a run's
// results do not depend on which one the machine picked.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "lockstep/tensor/simd_avx512.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor::internal {

// 6 rows x 16 columns = 12 accumulators: enough independent FMA chains to cover the FMA
// latency on two pipes, with 2 B loads and 1 broadcast register (15 of 16 ymm).
inline constexpr int kRowBlock = 6;

// kTwo = false: only the first vector of the panel (a tail of at most one vector's columns),
// so a short tail does not pay for a second vector of masked-off lanes.
template <int R, bool kMasked, bool kTwo = true>
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
    __m256 b1 = kTwo ? (kMasked ? _mm256_maskload_ps(brow + 8, m1) : _mm256_loadu_ps(brow + 8)) : b0;
    const float* acol = a + kk * a_ks;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m256 av = _mm256_broadcast_ss(acol + r * a_rs);
      acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
      if (kTwo) acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* crow = c + r * ldc;
    // alpha * acc (+ C) with one explicit rounding: a separate multiply and add would be
    // contracted into an FMA in some inlined copies and not in others.
    __m256 v0, v1;
    if (kMasked) {
      v0 = accumulate ? _mm256_fmadd_ps(acc0[r], va, _mm256_maskload_ps(crow, m0)) : _mm256_mul_ps(acc0[r], va);
      v1 = !kTwo        ? v0
           : accumulate ? _mm256_fmadd_ps(acc1[r], va, _mm256_maskload_ps(crow + 8, m1))
                        : _mm256_mul_ps(acc1[r], va);
      _mm256_maskstore_ps(crow, m0, v0);
      if (kTwo) _mm256_maskstore_ps(crow + 8, m1, v1);
    } else {
      v0 = accumulate ? _mm256_fmadd_ps(acc0[r], va, _mm256_loadu_ps(crow)) : _mm256_mul_ps(acc0[r], va);
      v1 = accumulate ? _mm256_fmadd_ps(acc1[r], va, _mm256_loadu_ps(crow + 8)) : _mm256_mul_ps(acc1[r], va);
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
    if (rem <= 8)
      MicroPanel<R, true, false>(K, a, a_rs, a_ks, b + c0, ldb, c + c0, ldc, alpha, accumulate, TailMask(rem),
                                 __m256i());
    else
      MicroPanel<R, true>(K, a, a_rs, a_ks, b + c0, ldb, c + c0, ldc, alpha, accumulate, TailMask(8),
                          TailMask(rem - 8));
  }
}

// rows (1..kRowBlock) picks the instantiation; other counts do nothing.
using MicroRowsFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t,
                             float, bool);

inline void MicroGemmAvx2(int rows, int64_t K, const float* a, int64_t a_rs, int64_t a_ks, const float* b, int64_t ldb,
                          int64_t ncols, float* c, int64_t ldc, float alpha, bool accumulate) {
  static constexpr MicroRowsFn kRows[] = {nullptr,      MicroRows<1>, MicroRows<2>, MicroRows<3>,
                                          MicroRows<4>, MicroRows<5>, MicroRows<6>};
  if (rows >= 1 && rows <= kRowBlock) kRows[rows](K, a, a_rs, a_ks, b, ldb, ncols, c, ldc, alpha, accumulate);
}

#define LOCKSTEP_AVX512 __attribute__((target("avx512f")))

template <int R, bool kMasked, bool kTwo = true>
LOCKSTEP_AVX512 inline void MicroPanel512(int64_t K, const float* a, int64_t a_rs, int64_t a_ks, const float* b,
                                          int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate,
                                          __mmask16 m0, __mmask16 m1) {
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < K; ++kk) {
    const float* brow = b + kk * ldb;
    __m512 b0 = kMasked ? _mm512_maskz_loadu_ps(m0, brow) : _mm512_loadu_ps(brow);
    __m512 b1 = kTwo ? (kMasked ? _mm512_maskz_loadu_ps(m1, brow + 16) : _mm512_loadu_ps(brow + 16)) : b0;
    const float* acol = a + kk * a_ks;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m512 av = _mm512_set1_ps(acol[r * a_rs]);
      acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
      if (kTwo) acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* crow = c + r * ldc;
    __m512 v0, v1;  // as in MicroPanel: one explicit rounding
    if (kMasked) {
      v0 = accumulate ? _mm512_fmadd_ps(acc0[r], va, _mm512_maskz_loadu_ps(m0, crow)) : _mm512_mul_ps(acc0[r], va);
      v1 = !kTwo        ? v0
           : accumulate ? _mm512_fmadd_ps(acc1[r], va, _mm512_maskz_loadu_ps(m1, crow + 16))
                        : _mm512_mul_ps(acc1[r], va);
      _mm512_mask_storeu_ps(crow, m0, v0);
      if (kTwo) _mm512_mask_storeu_ps(crow + 16, m1, v1);
    } else {
      v0 = accumulate ? _mm512_fmadd_ps(acc0[r], va, _mm512_loadu_ps(crow)) : _mm512_mul_ps(acc0[r], va);
      v1 = accumulate ? _mm512_fmadd_ps(acc1[r], va, _mm512_loadu_ps(crow + 16)) : _mm512_mul_ps(acc1[r], va);
      _mm512_storeu_ps(crow, v0);
      _mm512_storeu_ps(crow + 16, v1);
    }
  }
}

template <int R>
LOCKSTEP_AVX512 inline void MicroRows512(int64_t K, const float* a, int64_t a_rs, int64_t a_ks, const float* b,
                                         int64_t ldb, int64_t ncols, float* c, int64_t ldc, float alpha,
                                         bool accumulate) {
  int64_t c0 = 0;
  for (; c0 + 32 <= ncols; c0 += 32) {
    MicroPanel512<R, false>(K, a, a_rs, a_ks, b + c0, ldb, c + c0, ldc, alpha, accumulate, 0, 0);
  }
  if (c0 < ncols) {
    const int64_t rem = ncols - c0;
    const auto lanes = [](int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1u); };
    if (rem <= 16)
      MicroPanel512<R, true, false>(K, a, a_rs, a_ks, b + c0, ldb, c + c0, ldc, alpha, accumulate, lanes(rem), 0);
    else
      MicroPanel512<R, true>(K, a, a_rs, a_ks, b + c0, ldb, c + c0, ldc, alpha, accumulate, lanes(16),
                             lanes(rem - 16));
  }
}

inline void MicroGemmAvx512(int rows, int64_t K, const float* a, int64_t a_rs, int64_t a_ks, const float* b,
                            int64_t ldb, int64_t ncols, float* c, int64_t ldc, float alpha, bool accumulate) {
  static constexpr MicroRowsFn kRows[] = {nullptr,         MicroRows512<1>, MicroRows512<2>, MicroRows512<3>,
                                          MicroRows512<4>, MicroRows512<5>, MicroRows512<6>};
  if (rows >= 1 && rows <= kRowBlock) kRows[rows](K, a, a_rs, a_ks, b, ldb, ncols, c, ldc, alpha, accumulate);
}

#undef LOCKSTEP_AVX512

// The kernel for this processor (same bits either way, see above).
inline void MicroGemm(int rows, int64_t K, const float* a, int64_t a_rs, int64_t a_ks, const float* b, int64_t ldb,
                      int64_t ncols, float* c, int64_t ldc, float alpha, bool accumulate) {
  if (HasAvx512())
    MicroGemmAvx512(rows, K, a, a_rs, a_ks, b, ldb, ncols, c, ldc, alpha, accumulate);
  else
    MicroGemmAvx2(rows, K, a, a_rs, a_ks, b, ldb, ncols, c, ldc, alpha, accumulate);
}

}  // namespace lockstep::tensor::internal
