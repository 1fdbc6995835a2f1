#include "lockstep/nn/inputs.h"

#include <cstring>

namespace lockstep::nn {

autograd::Variable FloatInput(autograd::Tape& tape, const float* data, const tensor::Shape& shape) {
  tensor::Tensor t = tape.NewBuffer(shape);
  std::memcpy(t.data<float>(), data, t.nbytes());
  return autograd::Variable::Constant(t);
}

}  // namespace lockstep::nn
