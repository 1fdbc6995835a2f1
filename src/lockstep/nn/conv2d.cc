#include "lockstep/nn/conv2d.h"

#include <cmath>

#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

Variable Conv2dForward(Tape& tape, tensor::Conv2d* plan, const Variable& x, const Variable& w, const Variable& b) {
  const tensor::Conv2dShape& s = plan->shape();
  LS_CHECK(x.shape() == tensor::Shape({s.N, s.IC, s.H, s.W}))
      << "Conv2d input " << x.value().ToString() << " for plan N=" << s.N << " IC=" << s.IC << " H=" << s.H
      << " W=" << s.W;
  LS_CHECK(w.shape() == tensor::Shape({s.OC, s.IC, s.KH, s.KW})) << "Conv2d weight " << w.value().ToString();
  LS_CHECK(!b.defined() || b.numel() == s.OC) << "Conv2d bias " << b.value().ToString();
  const bool rec = tape.ShouldRecord({&x, &w, &b});
  Variable y = tape.NewActivation({s.N, s.OC, s.OH(), s.OW()}, rec);
  plan->Forward(y.data(), x.data(), w.data(), b.defined() ? b.data() : nullptr);
  if (rec) {
    autograd::BufferPool* pool = &tape.pool();
    tape.Record({x, w, b}, [plan, y, x, w, b, pool] { Conv2dBackward(plan, y, x, w, b, pool); });
  }
  return y;
}

void Conv2dBackward(tensor::Conv2d* plan, const Variable& y, const Variable& x, const Variable& w, const Variable& b,
                    autograd::BufferPool* pool) {
  if (!y.has_grad()) return;
  const float* dout = y.grad().data<float>();
  if (x.requires_grad() && w.requires_grad() && b.defined() && b.requires_grad()) {
    // The common case in one call (dout reordered once); a gradient of x that already holds
    // something goes the long way below (BackwardData overwrites).
    bool fresh = false;
    float* dx = x.GradForWrite(&fresh);
    if (fresh) {
      plan->Backward(dx, w.GradAccumulate(), b.GradAccumulate(), dout, x.data(), w.data());
      return;
    }
  }
  if (w.requires_grad() || (b.defined() && b.requires_grad())) {
    // Accumulates into both; a weight-only request still needs a bias buffer to write.
    float* db = b.defined() && b.requires_grad() ? b.GradAccumulate() : nullptr;
    tensor::Tensor unused_dw;
    if (!w.requires_grad()) unused_dw = pool->Zeros(w.shape());
    float* dw = w.requires_grad() ? w.GradAccumulate() : unused_dw.data<float>();
    plan->BackwardWeights(dw, db, dout, x.data());
  }
  if (x.requires_grad()) {
    // BackwardData overwrites: straight into a fresh gradient, else via scratch and +=.
    bool fresh = false;
    float* dx = x.GradForWrite(&fresh);
    if (fresh) {
      plan->BackwardData(dx, dout, w.data());
    } else {
      tensor::Tensor tmp = pool->Empty(x.shape());
      plan->BackwardData(tmp.data<float>(), dout, w.data());
      tensor::AddInPlace(dx, tmp.data<float>(), x.numel());
    }
  }
}

Variable Conv2dReluPoolForward(Tape& tape, tensor::Conv2d* plan, const Variable& x, const Variable& w,
                               const Variable& b) {
  const tensor::Conv2dShape& s = plan->shape();
  LS_CHECK(x.shape() == tensor::Shape({s.N, s.IC, s.H, s.W}) && w.shape() == tensor::Shape({s.OC, s.IC, s.KH, s.KW}) &&
           b.defined() && b.numel() == s.OC && s.OH() % 2 == 0 && s.OW() % 2 == 0)
      << "Conv2d+ReLU+MaxPool2x2: input " << x.value().ToString() << ", weight " << w.value().ToString()
      << " (needs a bias and an even output size)";
  const bool rec = tape.ShouldRecord({&x, &w, &b});
  const tensor::Shape pooled_shape({s.N, s.OC, s.OH() / 2, s.OW() / 2});
  Variable y = tape.NewActivation(pooled_shape, rec);
  tensor::Tensor argmax = tape.NewBuffer(pooled_shape, tensor::DType::kI32);
  plan->ForwardReluPool(y.data(), argmax.data<int32_t>(), x.data(), w.data(), b.data());
  if (!rec) return y;
  autograd::BufferPool* pool = &tape.pool();
  tape.Record({x, w, b}, [plan, y, x, w, b, argmax, pool] {
    if (!y.has_grad()) return;
    // Weight and bias gradients accumulate (into scratch when one is frozen); the input
    // gradient is overwritten: straight into a fresh one, else via scratch and +=.
    tensor::Tensor unused_dw, unused_db;
    if (!w.requires_grad()) unused_dw = pool->Zeros(w.shape());
    if (!b.requires_grad()) unused_db = pool->Zeros(b.shape());
    float* dw = w.requires_grad() ? w.GradAccumulate() : unused_dw.data<float>();
    float* db = b.requires_grad() ? b.GradAccumulate() : unused_db.data<float>();
    const int32_t* am = argmax.data<int32_t>();
    const float* dy = y.grad().data<float>();
    if (!x.requires_grad()) return plan->BackwardReluPool(nullptr, dw, db, dy, am, y.data(), x.data(), w.data());
    bool fresh = false;
    float* dx = x.GradForWrite(&fresh);
    if (fresh) return plan->BackwardReluPool(dx, dw, db, dy, am, y.data(), x.data(), w.data());
    tensor::Tensor tmp = pool->Empty(x.shape());
    plan->BackwardReluPool(tmp.data<float>(), dw, db, dy, am, y.data(), x.data(), w.data());
    tensor::AddInPlace(dx, tmp.data<float>(), x.numel());
  });
  return y;
}

Conv2d::Conv2d(ParameterStore& ps, const std::string& prefix, int64_t in_channels, int64_t out_channels, int64_t kernel,
               int64_t stride, int64_t pad)
    : ps_(&ps), ic_(in_channels), oc_(out_channels), k_(kernel), stride_(stride), pad_(pad) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_channels * kernel * kernel));
  w_ = ps.Add(prefix + ".weight", {out_channels, in_channels, kernel, kernel}, Init::Uniform(bound), /*decay=*/true);
  b_ = ps.Add(prefix + ".bias", {out_channels}, Init::Uniform(bound), /*decay=*/false);
}

tensor::Conv2d* Conv2d::PlanFor(const Variable& x) {
  LS_CHECK(x.value().ndim() == 4 && x.shape()[1] == ic_)
      << "Conv2d expects [N, " << ic_ << ", H, W], got " << x.value().ToString();
  const std::array<int64_t, 3> key{x.shape()[0], x.shape()[2], x.shape()[3]};
  auto& plan = plans_[key];
  if (plan == nullptr) {
    plan = std::make_unique<tensor::Conv2d>(key[0], ic_, key[1], key[2], oc_, k_, k_, stride_, pad_);
  }
  return plan.get();
}

Variable Conv2d::Forward(Tape& tape, const Variable& x) {
  return Conv2dForward(tape, PlanFor(x), x, ps_->var(w_), ps_->var(b_));
}

Variable Conv2d::ForwardReluPool(Tape& tape, const Variable& x) {
  return Conv2dReluPoolForward(tape, PlanFor(x), x, ps_->var(w_), ps_->var(b_));
}

int64_t Conv2d::MacsPerSample(int64_t h, int64_t w) const {
  const int64_t oh = (h + 2 * pad_ - k_) / stride_ + 1, ow = (w + 2 * pad_ - k_) / stride_ + 1;
  return oh * ow * oc_ * ic_ * k_ * k_;
}

}  // namespace lockstep::nn
