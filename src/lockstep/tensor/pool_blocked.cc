// ReLU + 2x2 max pooling straight from oneDNN's blocked activation layout (nChw8c or
// nChw16c: [N][C/B][H][W][B]), and its backward straight into that layout. The convolution
// before the pool produces this layout and its backward consumes it, so pooling here saves a
// reorder of the full-resolution activation each way (conv.h, Conv2d::ForwardReluPool).
//
// Same results as ReluMaxPool2x2Forward/Backward on the plain layout, bit for bit: the same
// window order (first maximum wins, NaN propagates), relu as max(0, x) with max_ps's NaN rule,
// gradient only where the pooled output is > 0, and +0 added to every gradient written.
// The record the backward needs is kept in the blocked order, [N][C/B][H/2][W/2][B]: the
// maximum's index into the plain plane where the pooled output is > 0, else -1 (no gradient),
// so neither pass transposes it and the backward does not read the pooled output.
// AVX2, 8 channels of a block at a time; 16-channel blocks with AVX-512 where the processor
// has it (below).
#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "lockstep/tensor/check.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/pool_blocked.h"
#include "lockstep/tensor/simd_avx512.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor::internal {
namespace {

// A row of pooled outputs (or their gradients) of one channel block goes through a [OW][kB]
// tile, so both layouts are read and written contiguously (the plain side a row of OW values
// per channel).
std::vector<float>& TileF(int which, size_t n) {
  thread_local std::vector<float> t[2];
  if (t[which].size() < n) t[which].resize(n);
  return t[which];
}

template <int kB>
void ForwardFromBlocked(float* out, int32_t* code, const float* x, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t OH = H / 2, OW = W / 2, CB = C / kB, plane = H * W, oplane = OH * OW;
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(N * C * plane))
  for (int64_t nb = 0; nb < N * CB; ++nb) {
    const float* xb = x + nb * plane * kB;
    int32_t* cb = code + nb * oplane * kB;
    const int64_t c0 = (nb / CB) * C + (nb % CB) * kB;  // first plain plane of this block
    float* best_tile = TileF(0, static_cast<size_t>(OW * kB)).data();
    for (int64_t oy = 0; oy < OH; ++oy) {
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int32_t p0 = static_cast<int32_t>(2 * oy * W + 2 * ox), w = static_cast<int32_t>(W);
        const int32_t pos[4] = {p0, p0 + 1, p0 + w, p0 + w + 1};
        for (int l = 0; l < kB; l += 8) {
          __m256 best = _mm256_loadu_ps(xb + pos[0] * kB + l);
          __m256i idx = _mm256_set1_epi32(pos[0]);
          for (int k = 1; k < 4; ++k) {
            // take when the best is not NaN and the candidate is greater or NaN
            const __m256 v = _mm256_loadu_ps(xb + pos[k] * kB + l);
            const __m256 take =
                _mm256_andnot_ps(_mm256_cmp_ps(best, best, _CMP_UNORD_Q), _mm256_cmp_ps(v, best, _CMP_NLE_UQ));
            best = _mm256_blendv_ps(best, v, take);
            idx = _mm256_castps_si256(
                _mm256_blendv_ps(_mm256_castsi256_ps(idx), _mm256_castsi256_ps(_mm256_set1_epi32(pos[k])), take));
          }
          const __m256 pass = _mm256_cmp_ps(best, _mm256_setzero_ps(), _CMP_GT_OQ);             // pooled output > 0
          _mm256_storeu_ps(best_tile + ox * kB + l, _mm256_max_ps(_mm256_setzero_ps(), best));  // NaN stays
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(cb + (oy * OW + ox) * kB + l),
                              _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(_mm256_set1_epi32(-1)),
                                                                   _mm256_castsi256_ps(idx), pass)));
        }
      }
      for (int l = 0; l < kB; ++l) {
        float* orow = out + (c0 + l) * oplane + oy * OW;
        for (int64_t ox = 0; ox < OW; ++ox) orow[ox] = best_tile[ox * kB + l];
      }
    }
  }
}

template <int kB>
void BackwardToBlocked(float* dx, const int32_t* code, const float* dout, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t OH = H / 2, OW = W / 2, CB = C / kB, plane = H * W, oplane = OH * OW;
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(N * C * plane))
  for (int64_t nb = 0; nb < N * CB; ++nb) {
    float* db = dx + nb * plane * kB;
    const int32_t* cb = code + nb * oplane * kB;
    const int64_t c0 = (nb / CB) * C + (nb % CB) * kB;
    float* g_tile = TileF(1, static_cast<size_t>(OW * kB)).data();
    for (int64_t oy = 0; oy < OH; ++oy) {
      for (int l = 0; l < kB; ++l) {
        const float* grow = dout + (c0 + l) * oplane + oy * OW;
        for (int64_t ox = 0; ox < OW; ++ox) g_tile[ox * kB + l] = grow[ox];
      }
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int32_t p0 = static_cast<int32_t>(2 * oy * W + 2 * ox), w = static_cast<int32_t>(W);
        const int32_t pos[4] = {p0, p0 + 1, p0 + w, p0 + w + 1};
        for (int l = 0; l < kB; l += 8) {
          const __m256 g = _mm256_loadu_ps(g_tile + ox * kB + l);
          const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cb + (oy * OW + ox) * kB + l));
          for (int k = 0; k < 4; ++k) {
            const __m256 hit = _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, _mm256_set1_epi32(pos[k])));
            _mm256_storeu_ps(db + pos[k] * kB + l, _mm256_add_ps(_mm256_and_ps(g, hit), _mm256_setzero_ps()));
          }
        }
      }
    }
  }
}

// 16-channel blocks (oneDNN's avx512_core layouts) with AVX-512: the same arithmetic, and the
// [OW][16] <-> [16][OW] tile transposes of the pooled output and its gradient in registers
// (Transpose16x16, simd_avx512.h) instead of element by element (the scalar transposes were most
// of these kernels' time: 17% of a one-thread cnn-fashion step).
#define LOCKSTEP_AVX512 __attribute__((target("avx512f")))
// GCC 12's unpack intrinsics (in Transpose16x16, inlined here) pass _mm512_undefined_ps() as the
// unused merge source, which -Wmaybe-uninitialized (and at -O1, as the sanitizer build compiles,
// -Wuninitialized) reports here, where the header's own pragmas no longer cover it: a known false
// positive of these headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

LOCKSTEP_AVX512 void ForwardFromBlocked16(float* out, int32_t* code, const float* x, int64_t N, int64_t C, int64_t H,
                                          int64_t W) {
  constexpr int kB = 16;
  const int64_t OH = H / 2, OW = W / 2, CB = C / kB, plane = H * W, oplane = OH * OW;
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(N * C * plane))
  for (int64_t nb = 0; nb < N * CB; ++nb) {
    const float* xb = x + nb * plane * kB;
    int32_t* cb = code + nb * oplane * kB;
    const int64_t c0 = (nb / CB) * C + (nb % CB) * kB;
    for (int64_t oy = 0; oy < OH; ++oy) {
      for (int64_t ox0 = 0; ox0 < OW; ox0 += 16) {
        const int cnt = static_cast<int>(std::min<int64_t>(16, OW - ox0));
        __m512 best[16];
        for (int j = 0; j < 16; ++j) {
          if (j >= cnt) {
            best[j] = _mm512_setzero_ps();
            continue;
          }
          const int32_t p0 = static_cast<int32_t>(2 * oy * W + 2 * (ox0 + j)), w = static_cast<int32_t>(W);
          const int32_t pos[4] = {p0, p0 + 1, p0 + w, p0 + w + 1};
          __m512 b = _mm512_loadu_ps(xb + pos[0] * kB);
          __m512i id = _mm512_set1_epi32(pos[0]);
          for (int k = 1; k < 4; ++k) {
            // take when the best is not NaN and the candidate is greater or NaN
            const __m512 v = _mm512_loadu_ps(xb + pos[k] * kB);
            const __mmask16 take =
                static_cast<__mmask16>(~_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(v, b, _CMP_NLE_UQ));
            b = _mm512_mask_blend_ps(take, b, v);
            id = _mm512_mask_blend_epi32(take, id, _mm512_set1_epi32(pos[k]));
          }
          const __mmask16 pass = _mm512_cmp_ps_mask(b, _mm512_setzero_ps(), _CMP_GT_OQ);  // pooled output > 0
          _mm512_storeu_si512(cb + (oy * OW + ox0 + j) * kB, _mm512_mask_blend_epi32(pass, _mm512_set1_epi32(-1), id));
          best[j] = _mm512_max_ps(_mm512_setzero_ps(), b);  // NaN stays
        }
        Transpose16x16(best);
        const __mmask16 m = static_cast<__mmask16>((1u << cnt) - 1);
        for (int l = 0; l < kB; ++l) _mm512_mask_storeu_ps(out + (c0 + l) * oplane + oy * OW + ox0, m, best[l]);
      }
    }
  }
}

// fp32 -> bf16 as VCVTNEPS2BF16 converts (what oneDNN's reorders into bf16 run on processors
// with AVX512_BF16, the only ones where bf16 plans are used): nearest even, a NaN kept a quiet
// NaN, zero and denormals to a zero of their sign. In AVX-512F integer operations, so this
// file needs no bf16 extension to build.
LOCKSTEP_AVX512 inline __m256i Bf16Like(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  const __mmask16 tiny = _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(0x00800000));
  r = _mm512_mask_mov_epi32(r, tiny, _mm512_srli_epi32(_mm512_andnot_si512(mag, u), 16));
  return _mm512_cvtepi32_epi16(r);
}

// Out: float (fp32 plans) or uint16_t (bf16 plans, whose backward primitives read a bf16
// output gradient: written through Bf16Like, as the reorder it replaces rounds).
template <typename Out>
LOCKSTEP_AVX512 void BackwardToBlocked16(Out* dx, const int32_t* code, const float* dout, int64_t N, int64_t C,
                                         int64_t H, int64_t W) {
  constexpr int kB = 16;
  const int64_t OH = H / 2, OW = W / 2, CB = C / kB, plane = H * W, oplane = OH * OW;
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(N * C * plane))
  for (int64_t nb = 0; nb < N * CB; ++nb) {
    Out* db = dx + nb * plane * kB;
    const int32_t* cb = code + nb * oplane * kB;
    const int64_t c0 = (nb / CB) * C + (nb % CB) * kB;
    for (int64_t oy = 0; oy < OH; ++oy) {
      for (int64_t ox0 = 0; ox0 < OW; ox0 += 16) {
        const int cnt = static_cast<int>(std::min<int64_t>(16, OW - ox0));
        const __mmask16 m = static_cast<__mmask16>((1u << cnt) - 1);
        __m512 g[16];
        for (int l = 0; l < kB; ++l) g[l] = _mm512_maskz_loadu_ps(m, dout + (c0 + l) * oplane + oy * OW + ox0);
        Transpose16x16(g);
        for (int j = 0; j < cnt; ++j) {
          const int32_t p0 = static_cast<int32_t>(2 * oy * W + 2 * (ox0 + j)), w = static_cast<int32_t>(W);
          const int32_t pos[4] = {p0, p0 + 1, p0 + w, p0 + w + 1};
          const __m512i aj = _mm512_loadu_si512(cb + (oy * OW + ox0 + j) * kB);
          for (int k = 0; k < 4; ++k) {
            const __mmask16 hit = _mm512_cmpeq_epi32_mask(aj, _mm512_set1_epi32(pos[k]));
            const __m512 v = _mm512_add_ps(_mm512_maskz_mov_ps(hit, g[j]), _mm512_setzero_ps());
            if constexpr (std::is_same_v<Out, float>)
              _mm512_storeu_ps(db + pos[k] * kB, v);
            else
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(db + pos[k] * kB), Bf16Like(v));
          }
        }
      }
    }
  }
}

#pragma GCC diagnostic pop
#undef LOCKSTEP_AVX512

}  // namespace

void ReluMaxPool2x2FromBlocked(float* out, int32_t* code, const float* x, int64_t N, int64_t C, int64_t H, int64_t W,
                               int block) {
  LS_CHECK(H % 2 == 0 && W % 2 == 0 && (block == 8 || block == 16) && C % block == 0)
      << "ReluMaxPool2x2FromBlocked: C=" << C << " H=" << H << " W=" << W << " block=" << block;
  if (block == 16 && HasAvx512())
    ForwardFromBlocked16(out, code, x, N, C, H, W);
  else if (block == 16)
    ForwardFromBlocked<16>(out, code, x, N, C, H, W);
  else
    ForwardFromBlocked<8>(out, code, x, N, C, H, W);
}

void ReluMaxPool2x2BackwardToBlocked(float* dx, const int32_t* code, const float* dout, int64_t N, int64_t C, int64_t H,
                                     int64_t W, int block) {
  LS_CHECK(H % 2 == 0 && W % 2 == 0 && (block == 8 || block == 16) && C % block == 0)
      << "ReluMaxPool2x2BackwardToBlocked: C=" << C << " H=" << H << " W=" << W << " block=" << block;
  if (block == 16 && HasAvx512())
    BackwardToBlocked16<float>(dx, code, dout, N, C, H, W);
  else if (block == 16)
    BackwardToBlocked<16>(dx, code, dout, N, C, H, W);
  else
    BackwardToBlocked<8>(dx, code, dout, N, C, H, W);
}

void ReluMaxPool2x2BackwardToBlockedBf16(uint16_t* dx, const int32_t* code, const float* dout, int64_t N, int64_t C,
                                         int64_t H, int64_t W) {
  LS_CHECK(H % 2 == 0 && W % 2 == 0 && C % 16 == 0 && HasAvx512())
      << "ReluMaxPool2x2BackwardToBlockedBf16: C=" << C << " H=" << H << " W=" << W << " (needs AVX-512)";
  BackwardToBlocked16<uint16_t>(dx, code, dout, N, C, H, W);
}

}  // namespace lockstep::tensor::internal
