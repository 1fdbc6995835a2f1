#include "lockstep/nn/cross_entropy.h"

#include <vector>

#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

Variable SoftmaxCrossEntropyForward(Tape& tape, const Variable& logits, const tensor::Tensor& targets, int64_t valid) {
  LS_CHECK(logits.value().ndim() == 2) << "CrossEntropy logits " << logits.value().ToString();
  const int64_t n = logits.shape()[0], v = logits.shape()[1];
  LS_CHECK(targets.dtype() == tensor::DType::kI32 && targets.numel() == n)
      << "CrossEntropy targets " << targets.ToString() << " for logits " << logits.value().ToString();
  const int32_t* t = targets.data<int32_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += t[i] >= 0;
  const bool rec = tape.ShouldRecord({&logits});
  Variable loss = tape.NewActivation({1}, rec);
  tensor::Tensor dlogits;
  if (rec) dlogits = tape.NewBuffer({n, v});
  const float dscale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  const double mean = tensor::SoftmaxCrossEntropy(nullptr, rec ? dlogits.data<float>() : nullptr, logits.data(), t, n,
                                                  v, dscale, valid);
  loss.data()[0] = static_cast<float>(mean);
  if (rec) {
    tape.Record({logits}, [loss, logits, dlogits] { SoftmaxCrossEntropyBackward(loss, logits, dlogits); });
  }
  return loss;
}

void SoftmaxCrossEntropyBackward(const Variable& loss, const Variable& logits, const tensor::Tensor& dlogits_unit) {
  if (!loss.has_grad()) return;
  const float dloss = loss.grad().data<float>()[0];
  const int64_t n = logits.numel();
  if (logits.AdoptGrad(dlogits_unit)) {
    // The saved buffer becomes the gradient: no copy, no zeroing.
    if (dloss != 1.0f) tensor::Scale(logits.grad_data(), dloss, n);
  } else {
    tensor::Axpy(logits.GradAccumulate(), dloss, dlogits_unit.data<float>(), n);
  }
}

CrossEntropyStats SoftmaxCrossEntropyStats(const float* logits, const int32_t* targets, int64_t n, int64_t v,
                                           int64_t valid) {
  CrossEntropyStats s;
  std::vector<float> losses(static_cast<size_t>(n));
  tensor::SoftmaxCrossEntropy(losses.data(), nullptr, logits, targets, n, v, 0.0f, valid);
  if (valid < 0) valid = v;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0) continue;
    s.loss_sum += losses[i];
    ++s.count;
    const float* row = logits + i * v;
    int64_t best = 0;
    for (int64_t j = 1; j < valid; ++j) {
      if (row[j] > row[best]) best = j;
    }
    s.correct += best == targets[i];
  }
  return s;
}

}  // namespace lockstep::nn
