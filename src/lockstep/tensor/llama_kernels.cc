// The kernels of the Llama family's block (kernels.h): RMSNorm, rotary position embedding with
// grouped-query packing of q, k and v for the attention kernel, and the SwiGLU gate. Their
// arithmetic is transformers' LlamaForCausalLM's in fp32.
//
// Reductions over rows (RMSNorm's weight gradient, the k/v gradient of a head group) run in a
// fixed order whatever the thread count: rows are cut into fixed chunks summed in chunk order,
// and a group's query heads are summed in head order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/simd_avx512.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor {
namespace {
constexpr int64_t kRowChunk = 128;
}  // namespace

void RmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int64_t n, int64_t c, float eps) {
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(n * c * 3))
  for (int64_t i = 0; i < n; ++i) {
    const float* x = inp + i * c;
    float* y = out + i * c;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < c; ++j) ss += x[j] * x[j];
    const float r = 1.0f / std::sqrt(ss / static_cast<float>(c) + eps);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) y[j] = (x[j] * r) * weight[j];
    if (rstd) rstd[i] = r;
  }
}

// y = (x r) w with r = (mean(x^2) + eps)^-1/2: dx = r (g - xhat mean(g xhat)) where g = w dy and
// xhat = x r; dw = sum over rows of dy xhat. dinp, dweight nullable.
void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                     const float* rstd, int64_t n, int64_t c) {
  const int64_t chunks = (n + kRowChunk - 1) / kRowChunk;
  std::vector<float> partial(dweight ? static_cast<size_t>(chunks * c) : 0, 0.0f);
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(n * c * 5))
  for (int64_t k = 0; k < chunks; ++k) {
    float* pw = dweight ? partial.data() + k * c : nullptr;
    for (int64_t i = k * kRowChunk; i < std::min(n, (k + 1) * kRowChunk); ++i) {
      const float* x = inp + i * c;
      const float* dy = dout + i * c;
      const float r = rstd[i];
      if (dinp) {
        float* dx = dinp + i * c;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < c; ++j) dot += weight[j] * dy[j] * (x[j] * r);
        const float m = dot / static_cast<float>(c);
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) dx[j] += r * (weight[j] * dy[j] - (x[j] * r) * m);
      }
      if (pw) {
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) pw[j] += dy[j] * (x[j] * r);
      }
    }
  }
  if (dweight)
    for (int64_t k = 0; k < chunks; ++k)
      for (int64_t j = 0; j < c; ++j) dweight[j] += partial[static_cast<size_t>(k * c + j)];
}

// For each row (position t = row % T) and head: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin on the
// two halves of the head's d columns (transformers' rotate_half), with cos/sin [T, d/2].
void PackRotaryQkv(float* packed, const float* q, const float* k, const float* v, const float* cos, const float* sin,
                   int64_t rows, int64_t T, int64_t heads, int64_t kv_heads, int64_t d) {
  const int64_t half = d / 2, group = heads / kv_heads, C = heads * d, KC = kv_heads * d;
  auto rotate = [&](float* y, const float* x, const float* c, const float* s) {
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      y[i] = x[i] * c[i] - x[i + half] * s[i];
      y[i + half] = x[i + half] * c[i] + x[i] * s[i];
    }
  };
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(rows * C * 3))
  for (int64_t r = 0; r < rows; ++r) {
    const float* c = cos + (r % T) * half;
    const float* s = sin + (r % T) * half;
    float* out = packed + r * 3 * C;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvh = h / group;  // the key/value head query head h reads
      rotate(out + h * d, q + r * C + h * d, c, s);
      rotate(out + C + h * d, k + r * KC + kvh * d, c, s);
      std::copy(v + r * KC + kvh * d, v + r * KC + (kvh + 1) * d, out + 2 * C + h * d);
    }
  }
}

// The transpose of PackRotaryQkv: dx1 = dy1 cos + dy2 sin, dx2 = dy2 cos - dy1 sin; a key/value
// head's gradient sums its group's query heads in head order. Accumulates into dq, dk, dv.
void PackRotaryQkvBackward(float* dq, float* dk, float* dv, const float* dpacked, const float* cos, const float* sin,
                           int64_t rows, int64_t T, int64_t heads, int64_t kv_heads, int64_t d) {
  const int64_t half = d / 2, group = heads / kv_heads, C = heads * d, KC = kv_heads * d;
  auto unrotate = [&](float* dx, const float* dy, const float* c, const float* s) {
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      dx[i] += dy[i] * c[i] + dy[i + half] * s[i];
      dx[i + half] += dy[i + half] * c[i] - dy[i] * s[i];
    }
  };
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(rows * C * 3))
  for (int64_t r = 0; r < rows; ++r) {
    const float* c = cos + (r % T) * half;
    const float* s = sin + (r % T) * half;
    const float* g = dpacked + r * 3 * C;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvh = h / group;
      if (dq) unrotate(dq + r * C + h * d, g + h * d, c, s);
      if (dk) unrotate(dk + r * KC + kvh * d, g + C + h * d, c, s);
      if (dv) {
        float* dst = dv + r * KC + kvh * d;
        const float* src = g + 2 * C + h * d;
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) dst[i] += src[i];
      }
    }
  }
}

// The SwiGLU gate on 8 lanes (AVX2) or 16 (AVX-512): sigmoid through the vector exp
// (simd_math.h; Exp512 gives each lane Exp256's bits) and the same operations in the same order
// on both widths and on a masked tail, so every element gets the same bits whatever the ISA,
// the thread count or where the element falls in a vector. silu(g) = g sigmoid(g); forward
// out = silu(g) u; backward d silu(g)/dg = s (1 + g (1 - s)) with s = sigmoid(g), accumulated.
namespace {

constexpr int64_t kSwiGluChunk = 1 << 12;  // elements a task: a multiple of both widths

inline __m256 Sigmoid256(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, internal::Exp256(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

void SwiGluForward256(float* out, const float* gate, const float* up, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; i += 8) {
    const __m256i m = internal::TailMask(std::min<int64_t>(8, e - i));
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 silu = _mm256_mul_ps(g, Sigmoid256(g));
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(silu, _mm256_maskload_ps(up + i, m)));
  }
}

void SwiGluBackward256(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t b,
                       int64_t e) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = b; i < e; i += 8) {
    const __m256i m = internal::TailMask(std::min<int64_t>(8, e - i));
    const __m256 g = _mm256_maskload_ps(gate + i, m), d = _mm256_maskload_ps(dout + i, m);
    const __m256 sg = Sigmoid256(g);
    if (dgate) {
      const __m256 slope = _mm256_mul_ps(sg, _mm256_fmadd_ps(g, _mm256_sub_ps(one, sg), one));
      const __m256 dg = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_maskload_ps(up + i, m)), slope);
      _mm256_maskstore_ps(dgate + i, m, _mm256_add_ps(_mm256_maskload_ps(dgate + i, m), dg));
    }
    if (dup) {
      const __m256 du = _mm256_mul_ps(d, _mm256_mul_ps(g, sg));
      _mm256_maskstore_ps(dup + i, m, _mm256_add_ps(_mm256_maskload_ps(dup + i, m), du));
    }
  }
}

#pragma GCC diagnostic push  // GCC 12's false positive on the AVX-512 intrinsics (simd_avx512.h)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) inline __m512 Sigmoid512(__m512 g) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, internal::Exp512(_mm512_sub_ps(_mm512_setzero_ps(), g))));
}

__attribute__((target("avx512f"))) inline __mmask16 Lanes16(int64_t left) {
  return static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1u);
}

__attribute__((target("avx512f"))) void SwiGluForward512(float* out, const float* gate, const float* up, int64_t b,
                                                         int64_t e) {
  for (int64_t i = b; i < e; i += 16) {
    const __mmask16 m = Lanes16(e - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 silu = _mm512_mul_ps(g, Sigmoid512(g));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

__attribute__((target("avx512f"))) void SwiGluBackward512(float* dgate, float* dup, const float* dout,
                                                          const float* gate, const float* up, int64_t b, int64_t e) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = b; i < e; i += 16) {
    const __mmask16 m = Lanes16(e - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i), d = _mm512_maskz_loadu_ps(m, dout + i);
    const __m512 sg = Sigmoid512(g);
    if (dgate) {
      const __m512 slope = _mm512_mul_ps(sg, _mm512_fmadd_ps(g, _mm512_sub_ps(one, sg), one));
      const __m512 dg = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_maskz_loadu_ps(m, up + i)), slope);
      _mm512_mask_storeu_ps(dgate + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, dgate + i), dg));
    }
    if (dup) {
      const __m512 du = _mm512_mul_ps(d, _mm512_mul_ps(g, sg));
      _mm512_mask_storeu_ps(dup + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, dup + i), du));
    }
  }
}
#pragma GCC diagnostic pop

}  // namespace

void SwiGluForward(float* out, const float* gate, const float* up, int64_t n) {
  const bool wide = internal::HasAvx512();
  const int64_t chunks = (n + kSwiGluChunk - 1) / kSwiGluChunk;
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(n * 4))
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kSwiGluChunk, e = std::min(n, b + kSwiGluChunk);
    if (wide) SwiGluForward512(out, gate, up, b, e);
    else SwiGluForward256(out, gate, up, b, e);
  }
}

void SwiGluBackward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t n) {
  const bool wide = internal::HasAvx512();
  const int64_t chunks = (n + kSwiGluChunk - 1) / kSwiGluChunk;
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(n * 6))
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kSwiGluChunk, e = std::min(n, b + kSwiGluChunk);
    if (wide) SwiGluBackward512(dgate, dup, dout, gate, up, b, e);
    else SwiGluBackward256(dgate, dup, dout, gate, up, b, e);
  }
}

}  // namespace lockstep::tensor
