#include "lockstep/nn/mse_loss.h"

#include <cstring>

namespace lockstep::nn {

Variable MseLossForward(Tape& tape, const Variable& pred, const float* targets) {
  const int64_t n = pred.numel();
  const bool rec = tape.ShouldRecord({&pred});
  Variable loss = tape.NewActivation({1}, rec);
  tensor::Tensor diff = tape.NewBuffer(pred.shape());
  float* dd = diff.data<float>();
  const float* p = pred.data();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    dd[i] = p[i] - targets[i];
    sum += static_cast<double>(dd[i]) * dd[i];
  }
  loss.data()[0] = static_cast<float>(sum / static_cast<double>(n));
  if (rec) {
    tape.Record({pred}, [loss, pred, diff, n] {
      if (!loss.has_grad()) return;
      const float scale = 2.0f * loss.grad().data<float>()[0] / static_cast<float>(n);
      float* g = pred.GradAccumulate();
      const float* d = diff.data<float>();
      for (int64_t i = 0; i < n; ++i) g[i] += scale * d[i];
    });
  }
  return loss;
}

double MseRowSum(const float* pred, const float* targets, int64_t n, int64_t d) {
  double total = 0;
  for (int64_t r = 0; r < n; ++r) {
    double row = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double e = static_cast<double>(pred[r * d + j]) - targets[r * d + j];
      row += e * e;
    }
    total += row / static_cast<double>(d);
  }
  return total;
}

}  // namespace lockstep::nn
