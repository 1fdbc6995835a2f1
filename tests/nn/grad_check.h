// Finite-difference gradient checking against the double-precision references.
//
// Each checked tensor's values live in a double vector that the reference loss reads; the
// checker perturbs one coordinate at a time by +-h and takes the central difference
// (f(v+h) - f(v-h)) / 2h, entirely in double: truncation error ~h^2 f''' ~1e-12, rounding
// ~1e-16 |f| / h ~1e-10, both far below what is being tested. The analytic gradient comes
// from the fp32 engine. It is accepted when
//     |analytic - fd| <= rtol * |fd| + atol * max_j |fd_j|   (max over the tensor's checked coords)
// with rtol = 1e-3 and atol = 1e-4: fp32 carries 24 bits (6e-8), and a backward pass of
// these sizes sums at most a few thousand products per output, so its error is about
// 1e-6..1e-5 of the gradient's scale; the bounds leave 10-100x margin, while any real
// mistake (a missed term, a wrong scale, a transposed index) is off by O(1).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/autograd/tape.h"
#include "nn/reference.h"

namespace lockstep::nn::testing {

struct Checked {
  std::string name;
  ref::Vec* value;          // perturbed in place; the reference loss must read it
  std::vector<float> grad;  // the engine's analytic gradient, same length
};

struct GradCheckOptions {
  int coords = 50;  // per tensor; all of them when the tensor is smaller
  double h = 1e-6;
  double rtol = 1e-3;
  double atol = 1e-4;
  uint64_t seed = 1;
};

// Checks every tensor (gtest expectations); returns the largest error seen, in units of
// the acceptance bound (<= 1 passes).
double ExpectGradientsMatch(const std::vector<Checked>& tensors, const std::function<double()>& f,
                            const GradCheckOptions& opt = {});

// As above, for references that can recompute cheaply when they know what moved: `f`
// is told the index of the perturbed tensor and the coordinate.
double ExpectGradientsMatch(const std::vector<Checked>& tensors,
                            const std::function<double(size_t tensor, int64_t coord)>& f,
                            const GradCheckOptions& opt = {});

// Uniform values in (-scale, scale) from the counter RNG.
std::vector<float> RandomVector(int64_t n, float scale, uint64_t seed);
ref::Vec ToDouble(const std::vector<float>& v);
ref::Vec ToDouble(const tensor::Tensor& t);
std::vector<float> ToFloat(const tensor::Tensor& t);

// A test input that requires grad: an activation with the given values.
autograd::Variable Leaf(autograd::Tape& tape, const tensor::Shape& shape, const std::vector<float>& values);
// sum(y * r): a scalar loss whose gradient w.r.t. y is r, recorded on the tape.
autograd::Variable ProbeLoss(autograd::Tape& tape, const autograd::Variable& y, const std::vector<float>& r);
double RefProbe(const ref::Vec& y, const std::vector<float>& r);

// Normwise forward agreement: max|a - b| / max|b|.
double MaxRelDiff(const std::vector<float>& a, const ref::Vec& b);

}  // namespace lockstep::nn::testing
