// Global gradient norm and clipping (torch.nn.utils.clip_grad_norm_ semantics), computed so the
// result is the same bits however the gradient is partitioned over ranks (ZeRO shards, tensor-
// and pipeline-parallel pieces): the sum of squares is exact (exact_square_sum.h), so each rank
// adds the elements it owns into an ExactSquareSum, the partial sums are merged by an integer
// allreduce, and the one rounding to double happens on the exact total.
#pragma once

#include <cstdint>

#include "lockstep/optim/exact_square_sum.h"

namespace lockstep::optim {

// sqrt of the exact sum of squares of grads[0..n) (NaN/inf if any element is).
double GlobalGradNorm(const float* grads, int64_t n);
// sqrt of a (merged) exact sum of squares.
double NormOf(const ExactSquareSum& sum);

// PyTorch: clip_coef = max_norm / (norm + 1e-6); if clip_coef < 1 the gradients are multiplied
// by (float)clip_coef. Returns the factor applied (1.0 when nothing was clipped). A shard
// calls this with the global norm and gets the same factor as every other shard.
// A non-finite norm leaves the gradients untouched and returns NaN: PyTorch would turn the
// whole buffer into NaN instead; the trainer should report the step (grad_norm is logged).
double ClipByGlobalNorm(float* grads, int64_t n, double max_norm, double norm);

// The float factor ClipByGlobalNorm multiplies every gradient by: 1 when nothing is clipped,
// and when the norm is not finite (the trainer skips such steps before clipping). An
// optimizer step given it (AdamW/Sgd's grad_scale) multiplies each gradient as it reads it,
// the same float product, so the step has the same bits without the clipping pass over the
// gradient (gpt-small: 342 MB read and written again each step while clipping).
float ClipFactor(double max_norm, double norm);

}  // namespace lockstep::optim
