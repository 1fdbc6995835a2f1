#include "lockstep/optim/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep::optim {
namespace {

// One block's partial: element i goes to lane i % 8, lanes combine in a fixed tree. The square
// of a float is exact in double, so whether the compiler fuses acc + x*x into an FMA cannot
// change a bit; eight independent lanes let it vectorize without reassociating anything.
double BlockSumOfSquares(const float* x, int64_t n) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      double d = static_cast<double>(x[i + j]);
      lane[j] += d * d;
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    double d = static_cast<double>(x[i]);
    lane[j] += d * d;
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

}  // namespace

void AppendBlockSumsOfSquares(const float* x, int64_t n, std::vector<double>* partials) {
  for (int64_t b = 0; b < n; b += kNormBlock) {
    partials->push_back(BlockSumOfSquares(x + b, std::min(kNormBlock, n - b)));
  }
}

double CombineBlockSums(std::span<const double> partials) {
  double total = 0.0;
  for (double p : partials) total += p;
  return total;
}

double GlobalGradNorm(const float* grads, int64_t n) {
  double total = 0.0;
  // Same as Append + Combine, without materializing the partials.
  for (int64_t b = 0; b < n; b += kNormBlock) total += BlockSumOfSquares(grads + b, std::min(kNormBlock, n - b));
  return std::sqrt(total);
}

double ClipByGlobalNorm(float* grads, int64_t n, double max_norm, double norm) {
  if (!std::isfinite(norm)) return std::numeric_limits<double>::quiet_NaN();
  double clip_coef = max_norm / (norm + 1e-6);
  if (!(clip_coef < 1.0)) return 1.0;
  const float scale = static_cast<float>(clip_coef);
  for (int64_t i = 0; i < n; ++i) grads[i] *= scale;
  return clip_coef;
}

}  // namespace lockstep::optim
