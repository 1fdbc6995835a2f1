// A batch's raw arrays as tape inputs: a model's Loss() starts from these (the tape owns the
// copy, so it stays valid through backward and its buffer is reused next step).
#pragma once

#include <cstdint>

#include "lockstep/autograd/tape.h"

namespace lockstep::nn {

// `data` holds numel(shape) floats; the result is a constant (no gradient) Variable.
autograd::Variable FloatInput(autograd::Tape& tape, const float* data, const tensor::Shape& shape);

}  // namespace lockstep::nn
