#include "lockstep/autograd/variable.h"

#include <cstring>

#include "lockstep/autograd/buffer_pool.h"

namespace lockstep::autograd {

using tensor::Tensor;

Variable Variable::Constant(Tensor value) {
  Variable v;
  v.impl_ = std::make_shared<Impl>();
  v.impl_->value = std::move(value);
  return v;
}

Variable Variable::Activation(Tensor value, bool requires_grad, BufferPool* pool) {
  Variable v;
  v.impl_ = std::make_shared<Impl>();
  v.impl_->value = std::move(value);
  v.impl_->requires_grad = requires_grad;
  v.impl_->pool = pool;
  return v;
}

Variable Variable::Parameter(Tensor value, Tensor grad, int param_index) {
  LS_CHECK(param_index >= 0) << "Parameter index " << param_index;
  LS_CHECK(!grad.defined() || grad.shape() == value.shape())
      << "Parameter grad " << grad.ToString() << " vs value " << value.ToString();
  Variable v;
  v.impl_ = std::make_shared<Impl>();
  v.impl_->value = std::move(value);
  v.impl_->grad = std::move(grad);
  v.impl_->requires_grad = true;
  v.impl_->param_index = param_index;
  return v;
}

Tensor Variable::NewGrad(bool zero) const {
  const tensor::Shape& s = impl_->value.shape();
  if (impl_->pool != nullptr) return zero ? impl_->pool->Zeros(s) : impl_->pool->Empty(s);
  return zero ? Tensor::Zeros(s) : Tensor::Empty(s);
}

void Variable::Rebind(Tensor value, Tensor grad) const {
  LS_CHECK(is_parameter()) << "Rebind on a Variable that is not a parameter";
  LS_CHECK(!grad.defined() || !value.defined() || grad.shape() == value.shape())
      << "Rebind grad " << grad.ToString() << " vs value " << value.ToString();
  impl_->value = std::move(value);
  impl_->grad = std::move(grad);
}

float* Variable::GradAccumulate() const {
  LS_CHECK(requires_grad()) << "GradAccumulate on a Variable that does not require grad";
  // A parameter's gradient is storage someone bound (a flat buffer, a ZeRO unit buffer);
  // inventing one here would silently lose the gradient.
  LS_CHECK(!is_parameter() || impl_->grad.defined())
      << "parameter " << param_index() << " has no gradient storage bound";
  if (!impl_->grad.defined()) impl_->grad = NewGrad(/*zero=*/true);
  return impl_->grad.data<float>();
}

float* Variable::GradForWrite(bool* fresh) const {
  LS_CHECK(requires_grad()) << "GradForWrite on a Variable that does not require grad";
  LS_CHECK(!is_parameter() || impl_->grad.defined())
      << "parameter " << param_index() << " has no gradient storage bound";
  *fresh = !impl_->grad.defined();
  if (*fresh) impl_->grad = NewGrad(/*zero=*/false);
  return impl_->grad.data<float>();
}

bool Variable::AdoptGrad(const Tensor& g) const {
  if (!requires_grad() || is_parameter() || impl_->grad.defined()) return false;
  LS_CHECK(g.numel() == numel() && g.is_contiguous())
      << "AdoptGrad " << g.ToString() << " for " << impl_->value.ToString();
  impl_->grad = g.shape() == shape() ? g : g.View(shape());
  return true;
}

Tensor Variable::TakeGrad() const {
  LS_CHECK(!is_parameter()) << "TakeGrad on a parameter";
  Tensor g = std::move(impl_->grad);
  impl_->grad = Tensor();
  return g;
}

}  // namespace lockstep::autograd
