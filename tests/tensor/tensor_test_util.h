// Helpers shared by the tensor tests: random inputs from lockstep::Rng, comparisons of
// fp32 kernel outputs against double-precision references, and bit-exact comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/core/rng.h"

namespace lockstep::tensor::testing {

// Uniform in [-scale, scale), reproducible from (seed, stream).
inline std::vector<float> RandomVector(int64_t n, uint64_t stream, float scale = 1.0f, uint64_t seed = 1234) {
  Rng rng(seed, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = (2.0f * rng.Uniform() - 1.0f) * scale;
  return v;
}

inline std::vector<int32_t> RandomIds(int64_t n, int32_t below, uint64_t stream) {
  Rng rng(99, stream);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = static_cast<int32_t>(rng.Below(below));
  return v;
}

inline std::vector<double> ToDouble(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Checks |got - want| <= atol + rtol * |want| elementwise; reports the worst element.
template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<double>& want, double atol, double rtol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = -1;
  size_t worst_i = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double excess = std::abs(static_cast<double>(got[i]) - want[i]) - (atol + rtol * std::abs(want[i]));
    if (std::isnan(excess)) excess = 1e300;
    if (i == 0 || excess > worst) {
      worst = excess;
      worst_i = i;
    }
  }
  if (got.empty()) return;
  EXPECT_LE(worst, 0.0) << what << ": element " << worst_i << " got " << got[worst_i] << " want " << want[worst_i]
                        << " (atol " << atol << ", rtol " << rtol << ")";
}

inline bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Central finite differences of a scalar function f(x) (double), step h.
inline std::vector<double> FiniteDiff(std::vector<double> x, const std::function<double(const std::vector<double>&)>& f,
                                      double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double xi = x[i];
    x[i] = xi + h;
    double fp = f(x);
    x[i] = xi - h;
    double fm = f(x);
    x[i] = xi;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

inline double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace lockstep::tensor::testing
