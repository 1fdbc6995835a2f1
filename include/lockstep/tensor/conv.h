// Conv2d: a cached plan of oneDNN convolution primitives for one shape.
// src/dst NCHW, weights OIHW, bias [OC], all fp32 and contiguous in the caller's buffers.
// Internally the plan may run on oneDNN's preferred (blocked) layouts and reorder at the
// edges; that choice is made once in the constructor (per primitive, from measurements).
// The CPU engine is shared (it is thread-safe) and each thread has its own stream, so a
// plan may be used from any thread, but not from two threads at once (blocked plans own
// reorder buffers). In deterministic mode the results do not depend on the thread count
// (see conv.cc).
#pragma once

#include <cstdint>
#include <memory>

namespace lockstep::tensor {

struct Conv2dShape {
  int64_t N, IC, H, W, OC, KH, KW;
  int64_t stride = 1;
  int64_t pad = 0;
  int64_t OH() const { return (H + 2 * pad - KH) / stride + 1; }
  int64_t OW() const { return (W + 2 * pad - KW) / stride + 1; }
};

struct Conv2dOptions {
  // Let oneDNN choose blocked layouts (reordering at the edges); false runs plain NCHW/OIHW
  // primitives directly on the caller's buffers.
  bool blocked_layouts = true;
};

class Conv2d {
 public:
  Conv2d(int64_t N, int64_t IC, int64_t H, int64_t W, int64_t OC, int64_t KH, int64_t KW, int64_t stride, int64_t pad);
  explicit Conv2d(const Conv2dShape& s, Conv2dOptions options = {});
  ~Conv2d();
  Conv2d(Conv2d&&) noexcept;
  Conv2d& operator=(Conv2d&&) noexcept;

  const Conv2dShape& shape() const { return shape_; }
  int64_t OH() const { return shape_.OH(); }
  int64_t OW() const { return shape_.OW(); }

  // out[N,OC,OH,OW] = conv(inp, w) + b (b nullable). Overwrites out.
  void Forward(float* out, const float* inp, const float* w, const float* b);
  // dinp[N,IC,H,W] = conv_transpose(dout, w). Overwrites dinp.
  void BackwardData(float* dinp, const float* dout, const float* w);
  // dw[OC,IC,KH,KW] += ..., db[OC] += sum dout (db nullable). Accumulate.
  void BackwardWeights(float* dw, float* db, const float* dout, const float* inp);
  // BackwardWeights then BackwardData (same results), reordering dout into the primitives'
  // blocked layout once for both where they share it.
  void Backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w);

  // Forward, then ReLU and 2x2 max pooling (OH, OW even): pooled [N, OC, OH/2, OW/2] exactly
  // as ReluMaxPool2x2Forward of Forward's output. Where the plan's output is blocked the pool
  // reads it there, saving the reorder of the full-resolution output. `argmax` (as many int32s
  // as pooled values) is the pool's record for BackwardReluPool, in a layout of the path's
  // choosing (ReluMaxPool2x2Forward's argmax on the plain path, pool_blocked.h's code on the
  // blocked one): the caller keeps it and passes it back under the same mode, precision and
  // compute thread count.
  void ForwardReluPool(float* pooled, int32_t* argmax, const float* inp, const float* w, const float* b);
  // Backward of ForwardReluPool from the pooled output's gradient: dinp overwritten (null:
  // not wanted), dw and db accumulate as in BackwardWeights (db nullable).
  void BackwardReluPool(float* dinp, float* dw, float* db, const float* dpooled, const int32_t* argmax,
                        const float* pooled, const float* inp, const float* w);

  // Rows the fused path (ForwardReluPool, BackwardReluPool) runs at a time under the current
  // compute thread count and mode: part of the minibatch where one thread pools from the
  // blocked output while it is in L2, else all of it. Its weight and bias gradients are the
  // chunks' added in order. (Makes the chunk's plan where it is not made yet.)
  int64_t FusedChunkRows();

  struct Impl;

 private:
  Conv2dShape shape_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::tensor
