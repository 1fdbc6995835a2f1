// Linear layers: the GEMMs, the bias passes, and the fused forms (with GELU, with a residual).
#include <omp.h>

#include <algorithm>
#include <vector>

#include "lockstep/tensor/bf16_ops.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor {
namespace {

// Column sums in a fixed order: out[j] += (sum over rows i in order, from 0) of what
// add_row(i, j0, j1, acc) adds into acc[j - j0] for row i's columns [j0, j1). Each thread of
// the team takes one contiguous range of columns and sweeps the rows in order over it, so every
// column's sum has the same order (and bits) for any thread count; one range per thread, not
// blocks of 64 columns, so a sweep reads whole rows in memory order (the 64-column blocks read
// the matrix in c / 64 strided passes: MulGradColumnSum on gpt-tiny's 2048 x 512, one thread,
// took 391 us so).
template <typename AddRow>
void ColumnBlockSums(float* out, int64_t n, int64_t c, AddRow add_row) {
  auto sweep = [&](int64_t j0, int64_t j1) {
    if (j0 >= j1) return;
    thread_local std::vector<float> acc;
    acc.assign(static_cast<size_t>(j1 - j0), 0.0f);
    for (int64_t i = 0; i < n; ++i) add_row(i, j0, j1, acc.data());
    for (int64_t j = j0; j < j1; ++j) out[j] += acc[static_cast<size_t>(j - j0)];
  };
  if (!internal::WorthParallel(n * c) || c < 32) {
    sweep(0, c);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t width = ((c + nt - 1) / nt + 15) / 16 * 16;  // whole vectors a thread
    sweep(std::min(c, t * width), std::min(c, (t + 1) * width));
  }
}

// out[j] += sum_i x[i, j].
void ColumnSumAccumulate(float* out, const float* x, int64_t n, int64_t c) {
  ColumnBlockSums(out, n, c, [x, c](int64_t i, int64_t j0, int64_t j1, float* acc) {
    const float* row = x + i * c;
#pragma omp simd
    for (int64_t j = j0; j < j1; ++j) acc[j - j0] += row[j];
  });
}

}  // namespace

void MulGradColumnSum(float* dinp, const float* grad, const float* dout, float* colsum, int64_t n, int64_t c) {
  if (colsum == nullptr) {
    MulGrad(dinp, grad, dout, n * c, /*accumulate=*/false);
    return;
  }
  // ColumnSumAccumulate's blocks and order, each product rounded as MulGrad's: the same bits as
  // the two passes.
  ColumnBlockSums(colsum, n, c, [=](int64_t i, int64_t j0, int64_t j1, float* acc) {
    const float* g = grad + i * c;
    const float* d = dout + i * c;
    float* o = dinp + i * c;
#pragma omp simd
    for (int64_t j = j0; j < j1; ++j) {
      const float v = g[j] * d[j];
      o[j] = v;
      acc[j - j0] += v;
    }
  });
}

void LinearForward(float* out, const float* inp, const float* weight, const float* bias, int64_t n, int64_t ic,
                   int64_t oc) {
  float beta = 0.0f;
  if (bias != nullptr) {
    // Seed C with the bias rows so the GEMM adds into them (beta = 1): one pass over out.
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(n * oc))
    for (int64_t i = 0; i < n; ++i) std::copy(bias, bias + oc, out + i * oc);
    beta = 1.0f;
  }
  Gemm(false, true, n, oc, ic, 1.0f, inp, ic, weight, ic, beta, out, oc);
}

void LinearResidualForward(float* out, const float* res, const float* inp, const float* weight, const float* bias,
                           int64_t n, int64_t ic, int64_t oc) {
#pragma omp parallel for schedule(static) if (parallel : internal::WorthParallel(n * oc))
  for (int64_t i = 0; i < n; ++i) {
    float* o = out + i * oc;
    const float* r = res + i * oc;
    if (bias == nullptr) {
      std::copy(r, r + oc, o);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < oc; ++j) o[j] = r[j] + bias[j];
    }
  }
  Gemm(false, true, n, oc, ic, 1.0f, inp, ic, weight, ic, 1.0f, out, oc);
}

void LinearGeluForward(float* out, float* z, const float* inp, const float* weight, const float* bias, int64_t n,
                       int64_t ic, int64_t oc, bool keep_grad) {
  Gemm(false, true, n, oc, ic, 1.0f, inp, ic, weight, ic, 0.0f, z, oc);
  BiasGelu(out, z, bias, n, oc, keep_grad);
}

void LinearBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight,
                    int64_t n, int64_t ic, int64_t oc, float dinp_beta) {
  if (!internal::LinearBackwardBf16(dinp, dinp_beta, dweight, dout, inp, weight, n, ic, oc)) {
    if (dinp != nullptr) Gemm(false, false, n, ic, oc, 1.0f, dout, oc, weight, ic, dinp_beta, dinp, ic);
    if (dweight != nullptr) Gemm(true, false, oc, ic, n, 1.0f, dout, oc, inp, ic, 1.0f, dweight, ic);
  }
  if (dbias != nullptr) ColumnSumAccumulate(dbias, dout, n, oc);
}

}  // namespace lockstep::tensor
