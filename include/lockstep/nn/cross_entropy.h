// Fused softmax + cross-entropy loss, mean over the rows whose target is >= 0 (rows with a
// negative target are ignored, like PyTorch's ignore_index).
#pragma once

#include <cstdint>

#include "lockstep/autograd/tape.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

// logits: [n, V]; targets: I32 [n] (or any shape of n elements) in [-1, V) (checked).
// Returns the mean loss as a [1] Variable. When recording, the forward also writes
// (softmax - onehot) / count into a saved buffer, so backward is a single scale by d(loss).
// `valid` < V: only the first `valid` columns are classes, the rest vocabulary padding that
// is never predicted (outside the softmax, zero gradient).
Variable SoftmaxCrossEntropyForward(Tape& tape, const Variable& logits, const tensor::Tensor& targets,
                                    int64_t valid = -1);
void SoftmaxCrossEntropyBackward(const Variable& loss, const Variable& logits, const tensor::Tensor& dlogits_unit);

// Evaluation helper (no tape): sum of per-row losses, counted rows, and rows whose argmax
// (first maximum) equals the target, over logits [n, V].
struct CrossEntropyStats {
  double loss_sum = 0.0;
  int64_t count = 0;
  int64_t correct = 0;
};
CrossEntropyStats SoftmaxCrossEntropyStats(const float* logits, const int32_t* targets, int64_t n, int64_t v,
                                           int64_t valid = -1);

}  // namespace lockstep::nn
