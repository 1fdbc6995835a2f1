#include "lockstep/nn/rms_norm.h"

#include "lockstep/tensor/check.h"
#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

Variable RmsNormForward(Tape& tape, const Variable& x, const Variable& weight, float eps) {
  const int64_t c = x.shape().back();
  LS_CHECK(weight.numel() == c) << "RmsNorm " << x.value().ToString() << " with weight " << weight.value().ToString();
  const int64_t n = x.numel() / c;
  const bool rec = tape.ShouldRecord({&x, &weight});
  Variable y = tape.NewActivation(x.shape(), rec);
  tensor::Tensor rstd;
  if (rec) rstd = tape.NewBuffer({n});
  tensor::RmsNormForward(y.data(), rec ? rstd.data<float>() : nullptr, x.data(), weight.data(), n, c, eps);
  if (rec) {
    tape.Record({x, weight}, [y, x, weight, rstd, n, c] {
      if (!y.has_grad()) return;
      tensor::RmsNormBackward(x.requires_grad() ? x.GradAccumulate() : nullptr,
                              weight.requires_grad() ? weight.GradAccumulate() : nullptr, y.grad().data<float>(),
                              x.data(), weight.data(), rstd.data<float>(), n, c);
    });
  }
  return y;
}

RmsNorm::RmsNorm(ParameterStore& ps, const std::string& prefix, int64_t dim, float eps) : ps_(&ps), eps_(eps) {
  w_ = ps.Add(prefix + ".weight", {dim}, Init::Ones(), /*decay=*/false);
}

Variable RmsNorm::Forward(Tape& tape, const Variable& x) const { return RmsNormForward(tape, x, ps_->var(w_), eps_); }

}  // namespace lockstep::nn
