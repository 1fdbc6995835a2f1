#include "lockstep/autograd/tape.h"

#include <algorithm>

namespace lockstep::autograd {

Tape::~Tape() {
  // Closures hold Variables whose buffers belong to the pool; drop them first.
  ops_.clear();
}

bool Tape::ShouldRecord(std::initializer_list<const Variable*> inputs) const {
  if (!grad_enabled_) return false;
  for (const Variable* v : inputs) {
    if (v != nullptr && v->requires_grad()) return true;
  }
  return false;
}

void Tape::BorrowPool(BufferPool* pool) {
  LS_CHECK(ops_.empty() && !in_backward_) << "Tape::BorrowPool with recorded ops";
  own_pool_.Release();
  pool_ = pool != nullptr ? pool : &own_pool_;
  borrowed_ = pool != nullptr;
}

Variable Tape::NewActivation(const tensor::Shape& shape, bool requires_grad) {
  return Variable::Activation(pool_->Empty(shape), requires_grad, pool_);
}

tensor::Tensor Tape::NewBuffer(const tensor::Shape& shape, tensor::DType dtype) { return pool_->Empty(shape, dtype); }

void Tape::EnsureParam(int index) {
  if (index >= num_params_) num_params_ = index + 1;
  if (static_cast<int>(pending_.size()) < num_params_) pending_.resize(num_params_, 0);
}

void Tape::DeclareParams(int num_params) {
  LS_CHECK(num_params >= 0) << "DeclareParams(" << num_params << ")";
  if (num_params > num_params_) EnsureParam(num_params - 1);
}

void Tape::Record(std::initializer_list<Variable> grad_targets, BackwardFn fn) {
  RecordOp(grad_targets.begin(), grad_targets.end(), std::move(fn));
}

void Tape::Record(const std::vector<Variable>& grad_targets, BackwardFn fn) {
  RecordOp(grad_targets.data(), grad_targets.data() + grad_targets.size(), std::move(fn));
}

void Tape::RecordOp(const Variable* begin, const Variable* end, BackwardFn fn) {
  LS_CHECK(!in_backward_) << "Tape::Record during Backward";
  LS_CHECK(grad_enabled_) << "Tape::Record with gradients disabled";
  Op op;
  op.fn = std::move(fn);
  for (const Variable* v = begin; v != end; ++v) {
    if (v->defined() && v->is_parameter()) {
      EnsureParam(v->param_index());
      ++pending_[v->param_index()];
      op.params.push_back(v->param_index());
    }
  }
  ops_.push_back(std::move(op));
}

void Tape::Backward(const Variable& loss, float grad_scale) {
  LS_CHECK(loss.defined() && loss.numel() == 1) << "Tape::Backward: the loss must hold exactly one element";
  LS_CHECK(!in_backward_) << "Tape::Backward re-entered";
  if (loss.requires_grad()) {
    bool fresh = false;
    float* g = loss.GradForWrite(&fresh);
    g[0] = fresh ? grad_scale : g[0] + grad_scale;
  }
  RunBackward();
}

void Tape::BackwardFrom(const Variable& output, const float* grad) {
  LS_CHECK(output.defined()) << "Tape::BackwardFrom: undefined output";
  LS_CHECK(!in_backward_) << "Tape::BackwardFrom re-entered";
  if (output.requires_grad()) {
    bool fresh = false;
    float* g = output.GradForWrite(&fresh);
    const int64_t n = output.numel();
    if (fresh)
      std::copy(grad, grad + n, g);
    else
      for (int64_t i = 0; i < n; ++i) g[i] += grad[i];
  }
  RunBackward();
}

void Tape::RunBackward() {
  in_backward_ = true;
  // Which parameters were used at all, before the counts run down.
  std::vector<char> used(num_params_, 0);
  for (int p = 0; p < num_params_; ++p) used[p] = pending_[p] > 0;
  for (size_t i = ops_.size(); i-- > 0;) {
    Op& op = ops_[i];
    op.fn();
    op.fn = nullptr;  // releases captured activations early
    for (int p : op.params) {
      if (--pending_[p] == 0 && hook_) hook_(p);
    }
  }
  unused_.clear();
  for (int p = 0; p < num_params_; ++p) {
    if (!used[p]) {
      unused_.push_back(p);
      if (hook_) hook_(p);
    }
  }
  in_backward_ = false;
  Clear();
}

void Tape::Clear() {
  LS_CHECK(!in_backward_) << "Tape::Clear during Backward";
  ops_.clear();
  std::fill(pending_.begin(), pending_.end(), 0);
  // A borrowed pool belongs to a tape whose step is still running.
  if (!borrowed_) pool_->Recycle();
}

}  // namespace lockstep::autograd
