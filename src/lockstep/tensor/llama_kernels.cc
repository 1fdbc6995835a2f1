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

// silu(g) = g sigmoid(g); out = silu(g) u.
void SwiGluForward(float* out, const float* gate, const float* up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : internal::WorthParallel(n * 4))
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float s = 1.0f / (1.0f + std::exp(-g));
    out[i] = (g * s) * up[i];  // silu(g) as the backward computes it
  }
}

// d silu(g)/dg = s (1 + g (1 - s)) with s = sigmoid(g). Accumulates.
void SwiGluBackward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : internal::WorthParallel(n * 6))
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float s = 1.0f / (1.0f + std::exp(-g));
    if (dgate) dgate[i] += dout[i] * up[i] * (s * (1.0f + g * (1.0f - s)));
    if (dup) dup[i] += dout[i] * (g * s);
  }
}

}  // namespace lockstep::tensor
