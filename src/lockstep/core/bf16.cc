#include "lockstep/core/bf16.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace lockstep {

void Bf16ToF32(const uint16_t* in, float* out, size_t count) {
  size_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= count; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(w));
  }
#endif
  for (; i < count; ++i) out[i] = Bf16ToF32(in[i]);
}

#if defined(__AVX2__)
namespace {

// The same integer rounding on 16 lanes (AVX-512F, chosen at run time): the same bits as the
// scalar form. (AVX512_BF16's vcvtneps2bf16 would be shorter, but it flushes denormals, so a
// machine with it would round differently from one without.)
#pragma GCC diagnostic push  // GCC 12's false positive on the AVX-512 intrinsics
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) size_t F32ToBf16Avx512(const float* in, uint16_t* out, size_t count) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x400000);
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(in + i));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(bias, lsb));
    const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
    const __m512i r = _mm512_srli_epi32(_mm512_mask_blend_epi32(is_nan, rounded, _mm512_or_si512(u, quiet)), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(r));
  }
  return i;
}
#pragma GCC diagnostic pop

bool HasAvx512F() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

}  // namespace
#endif

void F32ToBf16(const float* in, uint16_t* out, size_t count) {
  size_t i = 0;
#if defined(__AVX2__)
  if (HasAvx512F()) i = F32ToBf16Avx512(in, out, count);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i quiet = _mm256_set1_epi32(0x400000);
  for (; i + 8 <= count; i += 8) {
    __m256i u = _mm256_castps_si256(_mm256_loadu_ps(in + i));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(bias, lsb));
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(u, quiet), is_nan);
    r = _mm256_srli_epi32(r, 16);
    // Pack 8 x u32 (each < 65536) into 8 x u16; packus works per 128-bit lane.
    __m128i lo = _mm256_castsi256_si128(r);
    __m128i hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi32(lo, hi));
  }
#endif
  for (; i < count; ++i) out[i] = F32ToBf16(in[i]);
}

}  // namespace lockstep
