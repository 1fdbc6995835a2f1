#include "lockstep/nn/shape_ops.h"

#include <cstring>

#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

namespace {

// g += d, or g = d when fresh (one pass either way, no zeroing).
void AccumulateInto(const Variable& v, const tensor::Tensor& d) {
  if (!v.requires_grad()) return;
  bool fresh = false;
  float* g = v.GradForWrite(&fresh);
  if (fresh) {
    std::memcpy(g, d.data<float>(), d.nbytes());
  } else {
    tensor::AddInPlace(g, d.data<float>(), d.numel());
  }
}

}  // namespace

Variable AddForward(Tape& tape, const Variable& a, const Variable& b) {
  LS_CHECK(a.shape() == b.shape()) << "Add " << a.value().ToString() << " + " << b.value().ToString();
  const bool rec = tape.ShouldRecord({&a, &b});
  Variable out = tape.NewActivation(a.shape(), rec);
  tensor::Add(out.data(), a.data(), b.data(), a.numel());
  if (rec) tape.Record({a, b}, [out, a, b] { AddBackward(out, a, b); });
  return out;
}

void AddBackward(const Variable& out, const Variable& a, const Variable& b) {
  if (!out.has_grad()) return;
  // b first: it reads d(out) before `a` may take the buffer over (also right for a == b).
  AccumulateInto(b, out.grad());
  PassResidualGrad(out, a);
}

void PassResidualGrad(const Variable& out, const Variable& a) {
  if (!a.requires_grad()) return;
  if (a.AdoptGrad(out.grad())) {
    // d(out) is final (its producer is this op) and nobody reads it afterwards.
    out.TakeGrad();
  } else {
    tensor::AddInPlace(a.GradAccumulate(), out.grad().data<float>(), out.numel());
  }
}

Variable ReshapeForward(Tape& tape, const Variable& x, const tensor::Shape& shape) {
  const bool rec = tape.ShouldRecord({&x});
  Variable out = Variable::Activation(x.value().View(shape), rec, &tape.pool());
  if (rec) tape.Record({x}, [out, x] { ReshapeBackward(out, x); });
  return out;
}

void ReshapeBackward(const Variable& out, const Variable& x) {
  if (!out.has_grad() || !x.requires_grad()) return;
  if (x.AdoptGrad(out.grad())) {
    out.TakeGrad();
  } else {
    tensor::AddInPlace(x.GradAccumulate(), out.grad().data<float>(), out.numel());
  }
}

}  // namespace lockstep::nn
