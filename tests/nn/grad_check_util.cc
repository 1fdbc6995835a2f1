#include "nn/grad_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "lockstep/core/rng.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::nn::testing {

namespace {

// Every nn test runs its kernels on one compute thread: the layers' arithmetic does not
// depend on the thread count (tests/tensor checks the kernels' threading), and OpenMP
// barriers on an oversubscribed CI machine can turn a millisecond into a second.
class OneComputeThread : public ::testing::Environment {
 public:
  void SetUp() override { tensor::SetComputeThreads(1); }
};
[[maybe_unused]] ::testing::Environment* const kOneThread = ::testing::AddGlobalTestEnvironment(new OneComputeThread);

std::vector<int64_t> PickCoords(const std::vector<float>& grad, int coords, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(grad.size());
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  if (n <= coords) return idx;
  // A fifth from the largest analytic entries (where a wrong scale shows most), the rest
  // uniformly at random (where a missing contribution shows as a zero).
  const int top = coords / 5;
  std::partial_sort(idx.begin(), idx.begin() + top, idx.end(),
                    [&](int64_t a, int64_t b) { return std::fabs(grad[a]) > std::fabs(grad[b]); });
  std::vector<int64_t> out(idx.begin(), idx.begin() + top);
  Rng rng(seed, 99);
  // Partial Fisher-Yates over the remainder.
  for (int64_t i = top; i < coords; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(n - i)));
    std::swap(idx[i], idx[j]);
    out.push_back(idx[i]);
  }
  return out;
}

}  // namespace

double ExpectGradientsMatch(const std::vector<Checked>& tensors, const std::function<double()>& f,
                            const GradCheckOptions& opt) {
  return ExpectGradientsMatch(
      tensors, [&](size_t, int64_t) { return f(); }, opt);
}

double ExpectGradientsMatch(const std::vector<Checked>& tensors,
                            const std::function<double(size_t tensor, int64_t coord)>& f, const GradCheckOptions& opt) {
  double worst = 0.0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const Checked& c = tensors[t];
    EXPECT_EQ(c.value->size(), c.grad.size()) << c.name;
    if (c.value->size() != c.grad.size()) continue;
    const std::vector<int64_t> coords = PickCoords(c.grad, opt.coords, opt.seed + t);
    std::vector<double> fd(coords.size());
    for (size_t k = 0; k < coords.size(); ++k) {
      double& v = (*c.value)[coords[k]];
      const double orig = v;
      v = orig + opt.h;
      const double fp = f(t, coords[k]);
      v = orig - opt.h;
      const double fm = f(t, coords[k]);
      v = orig;
      fd[k] = (fp - fm) / (2.0 * opt.h);
    }
    double scale = 0.0;
    for (double d : fd) scale = std::max(scale, std::fabs(d));
    int failures = 0;
    for (size_t k = 0; k < coords.size(); ++k) {
      const double a = c.grad[coords[k]];
      const double bound = opt.rtol * std::fabs(fd[k]) + opt.atol * scale + 1e-12;
      const double err = std::fabs(a - fd[k]) / bound;
      worst = std::max(worst, err);
      if (err > 1.0 && failures++ < 5) {
        ADD_FAILURE() << c.name << "[" << coords[k] << "]: analytic " << a << " vs finite "
                      << "difference " << fd[k] << " (tensor scale " << scale << ")";
      }
    }
    EXPECT_GT(scale, 0.0) << c.name << ": every checked gradient is zero";
    double tensor_worst = 0.0, max_rel = 0.0;
    for (size_t k = 0; k < coords.size(); ++k) {
      const double d = std::fabs(c.grad[coords[k]] - fd[k]);
      tensor_worst = std::max(tensor_worst, d / (opt.rtol * std::fabs(fd[k]) + opt.atol * scale + 1e-12));
      max_rel = std::max(max_rel, d / (scale + 1e-30));
    }
    std::printf("  gradcheck %-28s %3zu coords  max|err|/scale %.2e  (%.2g of bound)\n", c.name.c_str(), coords.size(),
                max_rel, tensor_worst);
  }
  return worst;
}

std::vector<float> RandomVector(int64_t n, float scale, uint64_t seed) {
  Rng rng(seed, 7);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * (2.0f * rng.Uniform() - 1.0f);
  return v;
}

ref::Vec ToDouble(const std::vector<float>& v) { return ref::Vec(v.begin(), v.end()); }
ref::Vec ToDouble(const tensor::Tensor& t) { return ToDouble(t.ToVector()); }
std::vector<float> ToFloat(const tensor::Tensor& t) { return t.ToVector(); }

autograd::Variable Leaf(autograd::Tape& tape, const tensor::Shape& shape, const std::vector<float>& values) {
  autograd::Variable v = tape.NewActivation(shape, true);
  EXPECT_EQ(static_cast<int64_t>(values.size()), v.numel());
  std::copy(values.begin(), values.end(), v.data());
  return v;
}

autograd::Variable ProbeLoss(autograd::Tape& tape, const autograd::Variable& y, const std::vector<float>& r) {
  EXPECT_EQ(static_cast<int64_t>(r.size()), y.numel());
  const bool rec = tape.ShouldRecord({&y});
  autograd::Variable loss = tape.NewActivation({1}, rec);
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data()[i]) * r[i];
  loss.data()[0] = static_cast<float>(s);
  if (rec) {
    tape.Record({y}, [loss, y, r] {
      if (!loss.has_grad()) return;
      const float d = loss.grad_data()[0];
      float* g = y.GradAccumulate();
      for (int64_t i = 0; i < y.numel(); ++i) g[i] += d * r[i];
    });
  }
  return loss;
}

double RefProbe(const ref::Vec& y, const std::vector<float>& r) {
  double s = 0.0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
  return s;
}

double MaxRelDiff(const std::vector<float>& a, const ref::Vec& b) {
  if (a.size() != b.size()) return INFINITY;
  double mx = 0.0, worst = 0.0;
  for (double v : b) mx = std::max(mx, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst / (mx + 1e-30);
}

}  // namespace lockstep::nn::testing
