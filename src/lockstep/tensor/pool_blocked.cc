// ReLU + 2x2 max pooling straight from oneDNN's blocked activation layout (nChw8c or
// nChw16c: [N][C/B][H][W][B]), and its backward straight into that layout. The convolution
// before the pool produces this layout and its backward consumes it, so pooling here saves a
// reorder of the full-resolution activation each way (conv.h, Conv2d::ForwardReluPool).
//
// Same results as ReluMaxPool2x2Forward/Backward on the plain layout, bit for bit: the same
// window order (first maximum wins, NaN propagates), argmax as an index into the plain
// plane, relu as max(0, x) with max_ps's NaN rule, and +0 added to every gradient written.
#include <algorithm>

#include "lockstep/tensor/check.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/pool_blocked.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor::internal {
namespace {

template <int kB>
void ForwardFromBlocked(float* out, int32_t* argmax, const float* x, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t OH = H / 2, OW = W / 2, CB = C / kB, plane = H * W, oplane = OH * OW;
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(N * C * plane))
  for (int64_t nb = 0; nb < N * CB; ++nb) {
    const float* xb = x + nb * plane * kB;
    const int64_t c0 = (nb / CB) * C + (nb % CB) * kB;  // first plain plane of this block
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int32_t pos[4] = {static_cast<int32_t>(2 * oy * W + 2 * ox), static_cast<int32_t>(2 * oy * W + 2 * ox + 1),
                                static_cast<int32_t>((2 * oy + 1) * W + 2 * ox),
                                static_cast<int32_t>((2 * oy + 1) * W + 2 * ox + 1)};
        float best[kB];
        int32_t idx[kB];
        const float* v0 = xb + pos[0] * kB;
        for (int l = 0; l < kB; ++l) {
          best[l] = v0[l];
          idx[l] = pos[0];
        }
        for (int k = 1; k < 4; ++k) {
          const float* v = xb + pos[k] * kB;
          for (int l = 0; l < kB; ++l) {
            // take when the best is not NaN and the candidate is greater or NaN
            const bool take = best[l] == best[l] && !(v[l] <= best[l]);
            best[l] = take ? v[l] : best[l];
            idx[l] = take ? pos[k] : idx[l];
          }
        }
        const int64_t o = c0 * oplane + oy * OW + ox;
        for (int l = 0; l < kB; ++l) {
          out[o + l * oplane] = 0.0f > best[l] ? 0.0f : best[l];  // max_ps(0, x): NaN stays
          argmax[o + l * oplane] = idx[l];
        }
      }
  }
}

template <int kB>
void BackwardToBlocked(float* dx, const int32_t* argmax, const float* out, const float* dout, int64_t N, int64_t C,
                       int64_t H, int64_t W) {
  const int64_t OH = H / 2, OW = W / 2, CB = C / kB, plane = H * W, oplane = OH * OW;
#pragma omp parallel for schedule(static) if (parallel : WorthParallel(N * C * plane))
  for (int64_t nb = 0; nb < N * CB; ++nb) {
    float* db = dx + nb * plane * kB;
    const int64_t c0 = (nb / CB) * C + (nb % CB) * kB;
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int32_t pos[4] = {static_cast<int32_t>(2 * oy * W + 2 * ox), static_cast<int32_t>(2 * oy * W + 2 * ox + 1),
                                static_cast<int32_t>((2 * oy + 1) * W + 2 * ox),
                                static_cast<int32_t>((2 * oy + 1) * W + 2 * ox + 1)};
        const int64_t o = c0 * oplane + oy * OW + ox;
        float g[kB];
        int32_t a[kB];
        for (int l = 0; l < kB; ++l) {
          g[l] = out[o + l * oplane] > 0.0f ? dout[o + l * oplane] : 0.0f;
          a[l] = argmax[o + l * oplane];
        }
        for (int k = 0; k < 4; ++k) {
          float* d = db + pos[k] * kB;
          for (int l = 0; l < kB; ++l) d[l] = (a[l] == pos[k] ? g[l] : 0.0f) + 0.0f;
        }
      }
  }
}

}  // namespace

void ReluMaxPool2x2FromBlocked(float* out, int32_t* argmax, const float* x, int64_t N, int64_t C, int64_t H, int64_t W,
                               int block) {
  LS_CHECK(H % 2 == 0 && W % 2 == 0 && (block == 8 || block == 16) && C % block == 0)
      << "ReluMaxPool2x2FromBlocked: C=" << C << " H=" << H << " W=" << W << " block=" << block;
  if (block == 16)
    ForwardFromBlocked<16>(out, argmax, x, N, C, H, W);
  else
    ForwardFromBlocked<8>(out, argmax, x, N, C, H, W);
}

void ReluMaxPool2x2BackwardToBlocked(float* dx, const int32_t* argmax, const float* out, const float* dout, int64_t N,
                                     int64_t C, int64_t H, int64_t W, int block) {
  LS_CHECK(H % 2 == 0 && W % 2 == 0 && (block == 8 || block == 16) && C % block == 0)
      << "ReluMaxPool2x2BackwardToBlocked: C=" << C << " H=" << H << " W=" << W << " block=" << block;
  if (block == 16)
    BackwardToBlocked<16>(dx, argmax, out, dout, N, C, H, W);
  else
    BackwardToBlocked<8>(dx, argmax, out, dout, N, C, H, W);
}

}  // namespace lockstep::tensor::internal
