// Internal to tensor/: AVX-512 helpers, compiled with a target attribute so the binary keeps
// its x86-64-v3 floor; callers check the processor (HasAvx512) before use.
#pragma once

#include <immintrin.h>

namespace lockstep::tensor::internal {

// Whether this processor runs the AVX-512 builds of the kernels.
inline bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

// GCC 12's unpack intrinsics pass _mm512_undefined_ps() as the unused merge source, which
// -Wmaybe-uninitialized (and at -O1, as the sanitizer build compiles, -Wuninitialized) reports:
// a known false positive of these headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// r[i] (16 lanes each) becomes its transpose: r[k] lane i = old r[i] lane k.
__attribute__((target("avx512f"))) inline void Transpose16x16(__m512* r) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + c], 128-bit lane j: rows 4i..4i+3 at column 4j + c.
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  // Column 4j + c gathers lane j of u[c], u[4 + c], u[8 + c], u[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512 lo01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), hi01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
    const __m512 lo23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44),
                 hi23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_f32x4(lo01, lo23, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(lo01, lo23, 0xDD);
    r[8 + c] = _mm512_shuffle_f32x4(hi01, hi23, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(hi01, hi23, 0xDD);
  }
}

#pragma GCC diagnostic pop

}  // namespace lockstep::tensor::internal
