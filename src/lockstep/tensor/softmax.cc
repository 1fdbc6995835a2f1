// Row softmax and fused softmax + cross-entropy.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lockstep/tensor/check.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor {
namespace {

using internal::Exp256;

float RowMax(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + j));
  float r = internal::HorizontalMax(m);
  for (; j < n; ++j) r = std::max(r, x[j]);
  return r;
}

// y[j] = exp(x[j] - mx); returns sum_j y[j]. y may alias x.
float ExpShiftSum(float* y, const float* x, int64_t n, float mx) {
  __m256 vm = _mm256_set1_ps(mx);
  __m256 s = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 e = Exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
    _mm256_storeu_ps(y + j, e);
    s = _mm256_add_ps(s, e);
  }
  if (j < n) {
    __m256i mask = internal::TailMask(n - j);
    __m256 e = Exp256(_mm256_sub_ps(_mm256_maskload_ps(x + j, mask), vm));
    e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(y + j, mask, e);
    s = _mm256_add_ps(s, e);
  }
  return internal::HorizontalSum(s);
}

}  // namespace

void SoftmaxRows(float* out, const float* inp, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(rows * cols * 4))
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = inp + i * cols;
    float* y = out + i * cols;
    float mx = RowMax(x, cols);
    float inv = 1.0f / ExpShiftSum(y, x, cols, mx);
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) y[j] *= inv;
  }
}

double SoftmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* targets, int64_t n,
                           int64_t v, float dscale, int64_t valid) {
  // Columns [valid, v) are padding (a vocabulary padded to a multiple): outside the softmax,
  // with a zero gradient.
  if (valid < 0) valid = v;
  std::vector<float> own_losses;
  if (losses == nullptr) {
    own_losses.resize(n);
    losses = own_losses.data();
  }
#pragma omp parallel if (parallel : internal::WorthParallel(n * v * 4))
  {
    std::vector<float> prob(dlogits ? 0 : v);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float* x = logits + i * v;
      const int32_t t = targets[i];
      if (t < 0) {
        losses[i] = 0.0f;
        if (dlogits) std::fill(dlogits + i * v, dlogits + (i + 1) * v, 0.0f);
        continue;
      }
      LS_CHECK(t < valid) << "SoftmaxCrossEntropy: target " << t << " out of range [0, " << valid << ")";
      const float mx = RowMax(x, valid);
      const float xt = x[t];
      float* e = dlogits ? dlogits + i * v : prob.data();
      const float sum = ExpShiftSum(e, x, valid, mx);
      if (dlogits && valid < v) std::fill(e + valid, e + v, 0.0f);
      // loss = logsumexp(x) - x[t] = log(sum) + mx - x[t]
      losses[i] = std::log(sum) + (mx - xt);
      if (dlogits) {
        const float s = dscale / sum;
#pragma omp simd
        for (int64_t j = 0; j < valid; ++j) e[j] *= s;
        e[t] -= dscale;
      }
    }
  }
  double total = 0.0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0) continue;
    total += losses[i];
    ++count;
  }
  return count > 0 ? total / static_cast<double>(count) : 0.0;
}

}  // namespace lockstep::tensor
