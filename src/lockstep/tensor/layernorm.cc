// LayerNorm over the last dimension (rows of c), as in llm.c.
// Backward: dinp is per row (rows split over threads); dweight/dbias are sums over rows,
// so rows are cut into fixed chunks (independent of the thread count), each chunk sums
// into its own partial buffer in row order, and partials are added in chunk order.
#include <cmath>
#include <vector>

#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor {
namespace {
constexpr int64_t kRowChunk = 128;
}  // namespace

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                      int64_t n, int64_t c, float eps) {
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(n * c * 4))
  for (int64_t i = 0; i < n; ++i) {
    const float* x = inp + i * c;
    float* y = out + i * c;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < c; ++j) s += x[j];
    float m = s / static_cast<float>(c);
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < c; ++j) {
      float d = x[j] - m;
      v += d * d;
    }
    float r = 1.0f / std::sqrt(v / static_cast<float>(c) + eps);
    if (weight != nullptr && bias != nullptr) {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[j] = (x[j] - m) * r * weight[j] + bias[j];
    } else if (weight != nullptr) {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[j] = (x[j] - m) * r * weight[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[j] = (x[j] - m) * r;
    }
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = r;
  }
}

void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, const float* mean, const float* rstd, int64_t n, int64_t c) {
  int64_t nchunks = (n + kRowChunk - 1) / kRowChunk;
  bool want_params = dweight != nullptr || dbias != nullptr;
  // partial[k] = [dweight part (c) | dbias part (c)] of row chunk k.
  std::vector<float> partial(want_params ? nchunks * 2 * c : 0, 0.0f);
#pragma omp parallel if (parallel : internal::WorthParallel(n * c * 4))
  {
    std::vector<float> dnorm(c);
#pragma omp for schedule(static)
    for (int64_t k = 0; k < nchunks; ++k) {
      float* pw = want_params ? partial.data() + k * 2 * c : nullptr;
      float* pb = want_params ? pw + c : nullptr;
      int64_t end = std::min(n, (k + 1) * kRowChunk);
      for (int64_t i = k * kRowChunk; i < end; ++i) {
        const float* x = inp + i * c;
        const float* dy = dout + i * c;
        float* dx = dinp + i * c;
        const float m = mean[i], r = rstd[i];
        float sum_dn = 0.0f, sum_dn_xhat = 0.0f;
#pragma omp simd reduction(+ : sum_dn, sum_dn_xhat)
        for (int64_t j = 0; j < c; ++j) {
          float xhat = (x[j] - m) * r;
          float dn = weight ? weight[j] * dy[j] : dy[j];
          dnorm[j] = dn;
          sum_dn += dn;
          sum_dn_xhat += dn * xhat;
        }
        if (want_params) {
#pragma omp simd
          for (int64_t j = 0; j < c; ++j) {
            pw[j] += (x[j] - m) * r * dy[j];
            pb[j] += dy[j];
          }
        }
        const float mean_dn = sum_dn / static_cast<float>(c);
        const float mean_dn_xhat = sum_dn_xhat / static_cast<float>(c);
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) {
          float xhat = (x[j] - m) * r;
          dx[j] += (dnorm[j] - mean_dn - xhat * mean_dn_xhat) * r;
        }
      }
    }
  }
  if (!want_params) return;
  for (int64_t k = 0; k < nchunks; ++k) {
    const float* pw = partial.data() + k * 2 * c;
    const float* pb = pw + c;
    if (dweight) {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) dweight[j] += pw[j];
    }
    if (dbias) {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) dbias[j] += pb[j];
    }
  }
}

}  // namespace lockstep::tensor
