#include "lockstep/optim/grad_clip.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep::optim {
double NormOf(const ExactSquareSum& sum) { return std::sqrt(sum.Value()); }

double GlobalGradNorm(const float* grads, int64_t n) {
  ExactSquareSum sum;
  sum.Add(grads, n);
  return NormOf(sum);
}

float ClipFactor(double max_norm, double norm) {
  if (!std::isfinite(norm)) return 1.0f;
  const double clip_coef = max_norm / (norm + 1e-6);
  return clip_coef < 1.0 ? static_cast<float>(clip_coef) : 1.0f;
}

double ClipByGlobalNorm(float* grads, int64_t n, double max_norm, double norm) {
  if (!std::isfinite(norm)) return std::numeric_limits<double>::quiet_NaN();
  double clip_coef = max_norm / (norm + 1e-6);
  if (!(clip_coef < 1.0)) return 1.0;
  const float scale = static_cast<float>(clip_coef);
  // Elementwise, so splitting it over the compute threads changes no bit.
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 18) && !omp_in_parallel())
  for (int64_t i = 0; i < n; ++i) grads[i] *= scale;
  return clip_coef;
}

}  // namespace lockstep::optim
