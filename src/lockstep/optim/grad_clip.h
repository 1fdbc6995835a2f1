// Global gradient norm and clipping (torch.nn.utils.clip_grad_norm_ semantics), computed so the
// result is the same bits however the flat gradient buffer is partitioned.
//
// Why blocks: a norm over a sharded buffer (ZeRO) is a sum of per-shard partial sums, and a
// floating-point sum depends on its grouping. Here the sum of squares is defined over fixed
// blocks of kNormBlock elements counted from flat element 0: each block's partial is computed
// in double by one fixed recipe, and the partials are added in block order. A shard that
// starts on a block boundary computes its blocks' partials itself; gathering all partials and
// combining them in order gives exactly the single-buffer result.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lockstep::optim {

inline constexpr int64_t kNormBlock = 4096;

// Appends one partial sum of squares per kNormBlock elements of x (the last may be shorter).
// x[0] must be a block boundary of the flat buffer for partials to combine with other ranges'.
void AppendBlockSumsOfSquares(const float* x, int64_t n, std::vector<double>* partials);

// Sum of partials in order (left to right): the canonical combination.
double CombineBlockSums(std::span<const double> partials);

// sqrt of the canonical sum of squares of grads[0..n): deterministic, double accumulation.
double GlobalGradNorm(const float* grads, int64_t n);

// PyTorch: clip_coef = max_norm / (norm + 1e-6); if clip_coef < 1 the gradients are multiplied
// by (float)clip_coef. Returns the factor applied (1.0 when nothing was clipped). A shard
// calls this with the global norm and gets the same factor as every other shard.
// A non-finite norm leaves the gradients untouched and returns NaN: PyTorch would turn the
// whole buffer into NaN instead; the trainer should report the step (grad_norm is logged).
double ClipByGlobalNorm(float* grads, int64_t n, double max_norm, double norm);

}  // namespace lockstep::optim
