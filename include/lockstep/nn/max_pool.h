// 2x2 max pooling with stride 2 (PyTorch MaxPool2d(2)), NCHW, even H and W.
#pragma once

#include "lockstep/autograd/tape.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

// x: [N, C, H, W] -> [N, C, H/2, W/2]; saves the argmax of each window for backward.
Variable MaxPool2x2Forward(Tape& tape, const Variable& x);
void MaxPool2x2Backward(const Variable& y, const Variable& x, const tensor::Tensor& argmax);

// MaxPool2x2(ReLU(x)) in one pass over x: ReLU is monotonic, so this is ReLU(MaxPool2x2(x)),
// and the ReLU output (the largest activation of the cnn) is never materialised. Values and
// gradients are bit-identical to the two layers applied one after the other.
Variable ReluMaxPool2x2Forward(Tape& tape, const Variable& x);

}  // namespace lockstep::nn
