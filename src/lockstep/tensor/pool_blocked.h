// Internal to tensor/: ReLU + 2x2 max pooling on oneDNN's blocked activation layout
// ([N][C/block][H][W][block], block 8 or 16, C a multiple of block), for Conv2d's fused
// conv + relu + pool. Pooled output and input gradient as ReluMaxPool2x2Forward/Backward
// (kernels.h) on the plain layout, bit for bit; `out` and `dout` are plain [N, C, H/2, W/2].
// `code` (N * C * H/2 * W/2 entries) is the forward's record for the backward, in the blocked
// order: the window maximum's index into the plain plane where the output is > 0, else -1.
#pragma once

#include <cstdint>

namespace lockstep::tensor::internal {

void ReluMaxPool2x2FromBlocked(float* out, int32_t* code, const float* x, int64_t N, int64_t C, int64_t H, int64_t W,
                               int block);
// Writes every element of the blocked input gradient dx (no need to zero it).
void ReluMaxPool2x2BackwardToBlocked(float* dx, const int32_t* code, const float* dout, int64_t N, int64_t C, int64_t H,
                                     int64_t W, int block);
// The same gradient in bf16 for a bf16 plan's backward primitives (nChw16c, AVX-512), each
// value rounded as oneDNN's reorder into bf16 rounds it on a processor with AVX512_BF16
// (VCVTNEPS2BF16: nearest even, denormals to zero).
void ReluMaxPool2x2BackwardToBlockedBf16(uint16_t* dx, const int32_t* code, const float* dout, int64_t N, int64_t C,
                                         int64_t H, int64_t W);

}  // namespace lockstep::tensor::internal
