// Embedding lookup and 2x2 max pooling.
#include <algorithm>
#include <cstring>

#include <immintrin.h>

#include "lockstep/tensor/check.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor {

void EmbeddingForward(float* out, const int32_t* ids, const float* table, int64_t n, int64_t c) {
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(n * c))
  for (int64_t i = 0; i < n; ++i) {
    LS_CHECK(ids[i] >= 0) << "EmbeddingForward: negative id " << ids[i] << " at " << i;
    std::memcpy(out + i * c, table + static_cast<int64_t>(ids[i]) * c, c * sizeof(float));
  }
}

void EmbeddingBackward(float* dtable, const int32_t* ids, const float* dout, int64_t n, int64_t c) {
  // Columns are split over threads; within a column block rows are applied in order of i,
  // so every table entry receives its updates in the same order for any thread count.
  constexpr int64_t kCols = 64;
  int64_t nblocks = (c + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(n * c) && nblocks > 1)
  for (int64_t b = 0; b < nblocks; ++b) {
    int64_t j0 = b * kCols, j1 = std::min(c, j0 + kCols);
    for (int64_t i = 0; i < n; ++i) {
      float* dst = dtable + static_cast<int64_t>(ids[i]) * c;
      const float* src = dout + i * c;
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j) dst[j] += src[j];
    }
  }
}

namespace {

// One output row of 2x2 pooling: windows over input rows r0, r1 (row offset `base` in the
// plane), 8 outputs per step. A candidate replaces the best when it is greater or NaN,
// unless the best is already NaN: first maximum in window order, NaN propagates.
template <bool kRelu>
void PoolRow(float* y, int32_t* a, const float* r0, const float* r1, int64_t OW, int32_t base, int32_t W) {
  const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  int64_t ox = 0;
  for (; ox < OW; ox += 8) {
    const int64_t rem = std::min<int64_t>(8, OW - ox);
    __m256 a0, a1, b0, b1;  // row 0 / row 1, first / second 8 inputs
    if (rem == 8) {
      a0 = _mm256_loadu_ps(r0 + 2 * ox);
      a1 = _mm256_loadu_ps(r0 + 2 * ox + 8);
      b0 = _mm256_loadu_ps(r1 + 2 * ox);
      b1 = _mm256_loadu_ps(r1 + 2 * ox + 8);
    } else {
      const int64_t n = 2 * rem;
      __m256i m0 = internal::TailMask(std::min<int64_t>(n, 8));
      __m256i m1 = internal::TailMask(std::max<int64_t>(n - 8, 0));
      a0 = _mm256_maskload_ps(r0 + 2 * ox, m0);
      a1 = _mm256_maskload_ps(r0 + 2 * ox + 8, m1);
      b0 = _mm256_maskload_ps(r1 + 2 * ox, m0);
      b1 = _mm256_maskload_ps(r1 + 2 * ox + 8, m1);
    }
    // De-interleave even/odd columns; shuffle_ps works per 128-bit lane, permute fixes order.
    auto even = [](__m256 u, __m256 v) {
      return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(u, v, 0x88)), 0xD8));
    };
    auto odd = [](__m256 u, __m256 v) {
      return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(u, v, 0xDD)), 0xD8));
    };
    const __m256 cand[4] = {even(a0, a1), odd(a0, a1), even(b0, b1), odd(b0, b1)};
    const __m256i i00 = _mm256_add_epi32(_mm256_set1_epi32(base + 2 * static_cast<int32_t>(ox)), lane2);
    const __m256i offs[4] = {i00, _mm256_add_epi32(i00, _mm256_set1_epi32(1)),
                             _mm256_add_epi32(i00, _mm256_set1_epi32(W)),
                             _mm256_add_epi32(i00, _mm256_set1_epi32(W + 1))};
    __m256 best = cand[0];
    __m256i idx = offs[0];
    for (int k = 1; k < 4; ++k) {
      __m256 take =
          _mm256_andnot_ps(_mm256_cmp_ps(best, best, _CMP_UNORD_Q), _mm256_cmp_ps(cand[k], best, _CMP_NLE_UQ));
      best = _mm256_blendv_ps(best, cand[k], take);
      idx = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(idx), _mm256_castsi256_ps(offs[k]), take));
    }
    if (kRelu) {
      // relu(max) = max(relu): NaN stays NaN (max_ps returns the second operand on NaN).
      best = _mm256_max_ps(_mm256_setzero_ps(), best);
    }
    if (rem == 8) {
      _mm256_storeu_ps(y + ox, best);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + ox), idx);
    } else {
      __m256i m = internal::TailMask(rem);
      _mm256_maskstore_ps(y + ox, m, best);
      _mm256_maskstore_epi32(a + ox, m, idx);
    }
  }
}

template <bool kRelu>
void Pool2x2(float* out, int32_t* argmax, const float* inp, int64_t N, int64_t C, int64_t H, int64_t W) {
  LS_CHECK(H % 2 == 0 && W % 2 == 0) << "MaxPool2x2 needs even H, W; got " << H << "x" << W;
  const int64_t OH = H / 2, OW = W / 2, planes = N * C;
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(planes * H * W))
  for (int64_t p = 0; p < planes; ++p) {
    const float* x = inp + p * H * W;
    for (int64_t oy = 0; oy < OH; ++oy) {
      const float* r0 = x + 2 * oy * W;
      PoolRow<kRelu>(out + p * OH * OW + oy * OW, argmax + p * OH * OW + oy * OW, r0, r0 + W, OW,
                     static_cast<int32_t>(2 * oy * W), static_cast<int32_t>(W));
    }
  }
}

// The gradient of one output row of 2x2 pooling, written densely into input rows d0, d1:
// dy where the window's argmax is, 0 elsewhere (with kRelu, only where the pooled output is
// > 0). A dense pass instead of zeroing the input gradient and scattering into it: the
// scatter was the slowest kernel of the cnn step. Overwriting adds +0 to each value, which is
// what the zeroed-buffer scatter computed (0 + -0 = +0), so the bits are the same.
template <bool kRelu>
void PoolBackwardRow(float* d0, float* d1, const int32_t* a, const float* y, const float* dy, int64_t OW, int32_t base,
                     int32_t W, bool accumulate) {
  const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t ox = 0; ox < OW; ox += 8) {
    const int64_t rem = std::min<int64_t>(8, OW - ox);
    const __m256i m = internal::TailMask(rem);
    const __m256i arg = _mm256_maskload_epi32(a + ox, m);
    __m256 g = _mm256_maskload_ps(dy + ox, m);
    if (kRelu) g = _mm256_and_ps(g, _mm256_cmp_ps(_mm256_maskload_ps(y + ox, m), zero, _CMP_GT_OQ));
    const __m256i i00 = _mm256_add_epi32(_mm256_set1_epi32(base + 2 * static_cast<int32_t>(ox)), lane2);
    const __m256i offs[4] = {i00, _mm256_add_epi32(i00, _mm256_set1_epi32(1)),
                             _mm256_add_epi32(i00, _mm256_set1_epi32(W)),
                             _mm256_add_epi32(i00, _mm256_set1_epi32(W + 1))};
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpeq_epi32(arg, offs[k])));
    // Interleave the left (even column) and right (odd column) values of each input row.
    const __m256i m0 = internal::TailMask(std::min<int64_t>(2 * rem, 8));
    const __m256i m1 = internal::TailMask(std::max<int64_t>(2 * rem - 8, 0));
    for (int row = 0; row < 2; ++row) {
      float* d = (row == 0 ? d0 : d1) + 2 * ox;
      const __m256 lo = _mm256_unpacklo_ps(v[2 * row], v[2 * row + 1]);
      const __m256 hi = _mm256_unpackhi_ps(v[2 * row], v[2 * row + 1]);
      __m256 first = _mm256_permute2f128_ps(lo, hi, 0x20), second = _mm256_permute2f128_ps(lo, hi, 0x31);
      first = _mm256_add_ps(first, accumulate ? _mm256_maskload_ps(d, m0) : zero);
      second = _mm256_add_ps(second, accumulate ? _mm256_maskload_ps(d + 8, m1) : zero);
      _mm256_maskstore_ps(d, m0, first);
      _mm256_maskstore_ps(d + 8, m1, second);
    }
  }
}

template <bool kRelu>
void Pool2x2Backward(float* dinp, const int32_t* argmax, const float* out, const float* dout, int64_t N, int64_t C,
                     int64_t H, int64_t W, bool accumulate) {
  const int64_t OH = H / 2, OW = W / 2, plane_out = OH * OW, planes = N * C;
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(planes * H * W))
  for (int64_t p = 0; p < planes; ++p) {
    float* dx = dinp + p * H * W;
    const int64_t at = p * plane_out;
    for (int64_t oy = 0; oy < OH; ++oy) {
      const int64_t row = at + oy * OW;
      PoolBackwardRow<kRelu>(dx + 2 * oy * W, dx + (2 * oy + 1) * W, argmax + row, kRelu ? out + row : nullptr,
                             dout + row, OW, static_cast<int32_t>(2 * oy * W), static_cast<int32_t>(W), accumulate);
    }
  }
}

}  // namespace

void MaxPool2x2Forward(float* out, int32_t* argmax, const float* inp, int64_t N, int64_t C, int64_t H, int64_t W) {
  Pool2x2<false>(out, argmax, inp, N, C, H, W);
}

void MaxPool2x2Backward(float* dinp, const int32_t* argmax, const float* dout, int64_t N, int64_t C, int64_t H,
                        int64_t W, bool accumulate) {
  LS_CHECK(H % 2 == 0 && W % 2 == 0) << "MaxPool2x2Backward needs even H, W; got " << H << "x" << W;
  Pool2x2Backward<false>(dinp, argmax, nullptr, dout, N, C, H, W, accumulate);
}

void ReluMaxPool2x2Forward(float* out, int32_t* argmax, const float* inp, int64_t N, int64_t C, int64_t H, int64_t W) {
  Pool2x2<true>(out, argmax, inp, N, C, H, W);
}

void ReluMaxPool2x2Backward(float* dinp, const int32_t* argmax, const float* out, const float* dout, int64_t N,
                            int64_t C, int64_t H, int64_t W, bool accumulate) {
  LS_CHECK(H % 2 == 0 && W % 2 == 0) << "ReluMaxPool2x2Backward needs even H, W; got " << H << "x" << W;
  Pool2x2Backward<true>(dinp, argmax, out, dout, N, C, H, W, accumulate);
}

}  // namespace lockstep::tensor
