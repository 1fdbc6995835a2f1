#include "lockstep/nn/layer_norm.h"

#include <vector>

#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

Variable LayerNormForward(Tape& tape, const Variable& x, const Variable& weight, const Variable& bias, float eps) {
  const int64_t c = x.shape().back();
  LS_CHECK(weight.numel() == c && bias.numel() == c)
      << "LayerNorm " << x.value().ToString() << " with weight " << weight.value().ToString() << " bias "
      << bias.value().ToString();
  const int64_t n = x.numel() / c;
  const bool rec = tape.ShouldRecord({&x, &weight, &bias});
  Variable y = tape.NewActivation(x.shape(), rec);
  tensor::Tensor mean, rstd;
  if (rec) {
    mean = tape.NewBuffer({n});
    rstd = tape.NewBuffer({n});
  }
  tensor::LayerNormForward(y.data(), rec ? mean.data<float>() : nullptr, rec ? rstd.data<float>() : nullptr, x.data(),
                           weight.data(), bias.data(), n, c, eps);
  if (rec) {
    tape.Record({x, weight, bias},
                [y, x, weight, bias, mean, rstd] { LayerNormBackward(y, x, weight, bias, mean, rstd); });
  }
  return y;
}

void LayerNormBackward(const Variable& y, const Variable& x, const Variable& weight, const Variable& bias,
                       const tensor::Tensor& mean, const tensor::Tensor& rstd) {
  if (!y.has_grad()) return;
  const int64_t c = x.shape().back();
  const int64_t n = x.numel() / c;
  // The kernel always writes dx; give it a scratch row block when x needs no gradient.
  std::vector<float> scratch(x.requires_grad() ? 0 : static_cast<size_t>(x.numel()));
  tensor::LayerNormBackward(x.requires_grad() ? x.GradAccumulate() : scratch.data(),
                            weight.requires_grad() ? weight.GradAccumulate() : nullptr,
                            bias.requires_grad() ? bias.GradAccumulate() : nullptr, y.grad().data<float>(), x.data(),
                            weight.data(), mean.data<float>(), rstd.data<float>(), n, c);
}

LayerNorm::LayerNorm(ParameterStore& ps, const std::string& prefix, int64_t dim) : ps_(&ps) {
  w_ = ps.Add(prefix + ".weight", {dim}, Init::Ones(), /*decay=*/false);
  b_ = ps.Add(prefix + ".bias", {dim}, Init::Zeros(), /*decay=*/false);
}

Variable LayerNorm::Forward(Tape& tape, const Variable& x) const {
  return LayerNormForward(tape, x, ps_->var(w_), ps_->var(b_));
}

}  // namespace lockstep::nn
