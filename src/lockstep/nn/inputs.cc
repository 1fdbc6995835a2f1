#include "lockstep/nn/inputs.h"

#include <cstring>

namespace lockstep::nn {

autograd::Variable FloatInput(autograd::Tape& tape, const float* data, const tensor::Shape& shape) {
  tensor::Tensor t = tape.NewBuffer(shape);
  std::memcpy(t.data<float>(), data, t.nbytes());
  return autograd::Variable::Constant(t);
}

tensor::Tensor IntInput(autograd::Tape& tape, const int32_t* data, const tensor::Shape& shape) {
  tensor::Tensor t = tape.NewBuffer(shape, tensor::DType::kI32);
  std::memcpy(t.data<int32_t>(), data, t.nbytes());
  return t;
}

}  // namespace lockstep::nn
