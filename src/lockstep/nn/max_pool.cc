#include "lockstep/nn/max_pool.h"

#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

namespace {

void CheckPoolInput(const Variable& x) {
  LS_CHECK(x.value().ndim() == 4 && x.shape()[2] % 2 == 0 && x.shape()[3] % 2 == 0)
      << "MaxPool2x2 expects [N, C, H, W] with even H, W; got " << x.value().ToString();
}

// The shared shape of both pools: output and argmax of [N, C, H/2, W/2], the forward kernel
// fn(y, argmax, x, N, C, H, W), and the backward recorded when the tape records.
template <typename Kernel, typename Backward>
Variable Pool2x2(Tape& tape, const Variable& x, Kernel kernel, Backward backward) {
  CheckPoolInput(x);
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  const bool rec = tape.ShouldRecord({&x});
  Variable y = tape.NewActivation({N, C, H / 2, W / 2}, rec);
  tensor::Tensor argmax = tape.NewBuffer({N, C, H / 2, W / 2}, tensor::DType::kI32);
  kernel(y.data(), argmax.data<int32_t>(), x.data(), N, C, H, W);
  if (rec) tape.Record({x}, [y, x, argmax, backward] { backward(y, x, argmax); });
  return y;
}

}  // namespace

Variable MaxPool2x2Forward(Tape& tape, const Variable& x) {
  return Pool2x2(tape, x, tensor::MaxPool2x2Forward, MaxPool2x2Backward);
}

void MaxPool2x2Backward(const Variable& y, const Variable& x, const tensor::Tensor& argmax) {
  if (!y.has_grad()) return;
  bool fresh = false;  // a fresh gradient buffer is overwritten, not zeroed and added to
  float* dx = x.GradForWrite(&fresh);
  tensor::MaxPool2x2Backward(dx, argmax.data<int32_t>(), y.grad().data<float>(), x.shape()[0], x.shape()[1],
                             x.shape()[2], x.shape()[3], /*accumulate=*/!fresh);
}

Variable ReluMaxPool2x2Forward(Tape& tape, const Variable& x) {
  return Pool2x2(
      tape, x, tensor::ReluMaxPool2x2Forward, [](const Variable& y, const Variable& x, const tensor::Tensor& argmax) {
        if (!y.has_grad()) return;
        bool fresh = false;
        float* dx = x.GradForWrite(&fresh);
        tensor::ReluMaxPool2x2Backward(dx, argmax.data<int32_t>(), y.data(), y.grad().data<float>(), x.shape()[0],
                                       x.shape()[1], x.shape()[2], x.shape()[3], /*accumulate=*/!fresh);
      });
}

}  // namespace lockstep::nn
