#include "lockstep/nn/linear.h"

#include <cmath>

#include "lockstep/nn/shape_ops.h"
#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

namespace {

// Checks x [..., IC], w [OC, IC], b [OC]; returns the output's shape [..., OC].
tensor::Shape LinearOutputShape(const Variable& x, const Variable& w, const Variable& b) {
  LS_CHECK(w.value().ndim() == 2) << "Linear weight " << w.value().ToString();
  const int64_t oc = w.shape()[0], ic = w.shape()[1];
  LS_CHECK(x.value().ndim() >= 1 && x.shape().back() == ic)
      << "Linear input " << x.value().ToString() << " for weight " << w.value().ToString();
  LS_CHECK(!b.defined() || (b.value().ndim() == 1 && b.shape()[0] == oc)) << "Linear bias " << b.value().ToString();
  tensor::Shape out_shape = x.shape();
  out_shape.back() = oc;
  return out_shape;
}

}  // namespace

Variable LinearForward(Tape& tape, const Variable& x, const Variable& w, const Variable& b) {
  const tensor::Shape out_shape = LinearOutputShape(x, w, b);
  const int64_t oc = w.shape()[0], ic = w.shape()[1], n = x.numel() / ic;
  const bool rec = tape.ShouldRecord({&x, &w, &b});
  Variable y = tape.NewActivation(out_shape, rec);
  tensor::LinearForward(y.data(), x.data(), w.data(), b.defined() ? b.data() : nullptr, n, ic, oc);
  if (rec) tape.Record({x, w, b}, [y, x, w, b] { LinearBackward(y, x, w, b); });
  return y;
}

void LinearBackward(const Variable& y, const Variable& x, const Variable& w, const Variable& b) {
  if (y.has_grad()) LinearBackwardFrom(y.grad().data<float>(), x, w, b);
}

void LinearBackwardFrom(const float* dout, const Variable& x, const Variable& w, const Variable& b) {
  const int64_t oc = w.shape()[0], ic = w.shape()[1];
  const int64_t n = x.numel() / ic;
  // dx[n,ic] (+)= dy[n,oc] . W[oc,ic]; a fresh gradient is written with beta = 0, which
  // saves zeroing it first. One call for dx, dW and db: in bf16 it rounds dy once for both
  // products instead of once for each (the same rounded values, so the same bits).
  bool fresh = false;
  float* dx = x.requires_grad() ? x.GradForWrite(&fresh) : nullptr;
  float* dw = w.requires_grad() ? w.GradAccumulate() : nullptr;
  float* db = b.defined() && b.requires_grad() ? b.GradAccumulate() : nullptr;
  if (dx != nullptr || dw != nullptr || db != nullptr) {
    tensor::LinearBackward(dx, dw, db, dout, x.data(), w.data(), n, ic, oc, fresh ? 0.0f : 1.0f);
  }
}

Variable LinearGeluForward(Tape& tape, const Variable& x, const Variable& w, const Variable& b) {
  const tensor::Shape out_shape = LinearOutputShape(x, w, b);
  const int64_t oc = w.shape()[0], ic = w.shape()[1], n = x.numel() / ic;
  const bool rec = tape.ShouldRecord({&x, &w, &b});
  Variable y = tape.NewActivation(out_shape, rec);
  tensor::Tensor z = tape.NewBuffer(out_shape);  // pre-activation, then gelu', then its gradient
  tensor::LinearGeluForward(y.data(), z.data<float>(), x.data(), w.data(), b.defined() ? b.data() : nullptr, n, ic,
                            oc, /*keep_grad=*/rec);
  if (!rec) return y;
  tape.Record({x, w, b}, [y, z, x, w, b, n, oc]() mutable {
    if (!y.has_grad()) return;
    float* dz = z.data<float>();
    float* db = b.defined() && b.requires_grad() ? b.GradAccumulate() : nullptr;
    tensor::MulGradColumnSum(dz, dz, y.grad().data<float>(), db, n, oc);  // the bias's gradient in the same pass
    LinearBackwardFrom(dz, x, w, Variable());
  });
  return y;
}

Variable LinearResidualForward(Tape& tape, const Variable& res, const Variable& x, const Variable& w,
                               const Variable& b) {
  const tensor::Shape out_shape = LinearOutputShape(x, w, b);
  LS_CHECK(res.shape() == out_shape) << "Linear residual " << res.value().ToString() << " for weight "
                                     << w.value().ToString();
  const int64_t oc = w.shape()[0], ic = w.shape()[1], n = x.numel() / ic;
  const bool rec = tape.ShouldRecord({&res, &x, &w, &b});
  Variable y = tape.NewActivation(out_shape, rec);
  tensor::LinearResidualForward(y.data(), res.data(), x.data(), w.data(), b.defined() ? b.data() : nullptr, n, ic, oc);
  if (rec) {
    tape.Record({res, x, w, b}, [y, res, x, w, b] {
      if (!y.has_grad()) return;
      LinearBackwardFrom(y.grad().data<float>(), x, w, b);  // reads d(out) before res may take it
      PassResidualGrad(y, res);
    });
  }
  return y;
}

Linear::Linear(ParameterStore& ps, const std::string& prefix, int64_t in, int64_t out, bool bias, Init weight_init,
               Init bias_init)
    : ps_(&ps), in_(in), out_(out) {
  w_ = ps.Add(prefix + ".weight", {out, in}, weight_init, /*decay=*/true);
  if (bias) b_ = ps.Add(prefix + ".bias", {out}, bias_init, /*decay=*/false);
}

Linear Linear::TorchDefault(ParameterStore& ps, const std::string& prefix, int64_t in, int64_t out, bool bias) {
  // kaiming_uniform_(a=sqrt(5)) gives bound gain*sqrt(3/fan_in) with gain = sqrt(2/(1+5)),
  // i.e. 1/sqrt(fan_in); the bias uses the same bound.
  const float bound = 1.0f / std::sqrt(static_cast<float>(in));
  return Linear(ps, prefix, in, out, bias, Init::Uniform(bound), Init::Uniform(bound));
}

Variable Linear::BiasVar() const { return b_ >= 0 ? ps_->var(b_) : Variable(); }

Variable Linear::Forward(Tape& tape, const Variable& x) const {
  return LinearForward(tape, x, ps_->var(w_), BiasVar());
}

Variable Linear::ForwardResidual(Tape& tape, const Variable& x, const Variable& res) const {
  return LinearResidualForward(tape, res, x, ps_->var(w_), BiasVar());
}

Variable Linear::ForwardGelu(Tape& tape, const Variable& x) const {
  return LinearGeluForward(tape, x, ps_->var(w_), BiasVar());
}

}  // namespace lockstep::nn
