#include "lockstep/nn/parameter_store.h"

#include <cstring>

#include "lockstep/core/hash.h"
#include "lockstep/core/rng.h"

namespace lockstep::nn {

using tensor::MemoryTag;
using tensor::Tensor;

void InitValues(float* out, int64_t n, const Init& init, std::string_view name, uint64_t seed, int64_t first_element) {
  switch (init.kind) {
    case Init::Kind::kZeros:
      std::memset(out, 0, static_cast<size_t>(n) * sizeof(float));
      return;
    case Init::Kind::kOnes:
      for (int64_t j = 0; j < n; ++j) out[j] = 1.0f;
      return;
    case Init::Kind::kNormal:
    case Init::Kind::kUniform:
      break;
  }
  const uint64_t stream = Xxh64(name.data(), name.size());
  // One Philox block per element: element j is counter first_element + j.
  Rng rng(seed, stream, static_cast<uint64_t>(first_element));
  if (init.kind == Init::Kind::kNormal) {
    for (int64_t j = 0; j < n; ++j) out[j] = init.scale * rng.Normal();
  } else {
    for (int64_t j = 0; j < n; ++j) out[j] = init.scale * (2.0f * rng.Uniform() - 1.0f);
  }
}

int ParameterStore::Add(std::string name, tensor::Shape shape, Init init, bool decay) {
  LS_CHECK(!finalized_) << "ParameterStore::Add(" << name << ") after Finalize";
  LS_CHECK(!name.empty()) << "ParameterStore::Add: empty name";
  LS_CHECK(by_name_.count(name) == 0) << "ParameterStore::Add: duplicate name " << name;
  ParamInfo info;
  info.numel = tensor::NumElements(shape);
  LS_CHECK(info.numel > 0) << "ParameterStore::Add(" << name << "): empty shape";
  info.name = std::move(name);
  info.shape = std::move(shape);
  info.init = init;
  info.decay = decay;
  info.offset = numel_;
  numel_ += info.numel;
  int index = static_cast<int>(infos_.size());
  by_name_[info.name] = index;
  infos_.push_back(std::move(info));
  return index;
}

void ParameterStore::Finalize(uint64_t init_seed) {
  Allocate();
  Initialize(init_seed);
}

void ParameterStore::Allocate() { AllocatePartial(true, true); }

void ParameterStore::AllocatePartial(bool params, bool grads) {
  LS_CHECK(!finalized_) << "ParameterStore::Finalize called twice";
  LS_CHECK(numel_ > 0) << "ParameterStore::Finalize with no parameters";
  if (params) params_ = Tensor::Empty({numel_}, tensor::DType::kF32, MemoryTag::kParameter);
  if (grads) grads_ = Tensor::Zeros({numel_}, tensor::DType::kF32, MemoryTag::kGradient);
  vars_.reserve(infos_.size());
  for (int i = 0; i < size(); ++i) {
    const ParamInfo& p = infos_[i];
    vars_.push_back(
        autograd::Variable::Parameter(params ? Tensor::FromStorage(params_.storage(), p.offset, p.shape) : Tensor(),
                                      grads ? Tensor::FromStorage(grads_.storage(), p.offset, p.shape) : Tensor(), i));
  }
  finalized_ = true;
}

void ParameterStore::DetachStorage(bool params, bool grads) {
  CheckFinalized();
  for (int i = 0; i < size(); ++i) {
    const autograd::Variable& v = vars_[i];
    v.Rebind(params ? Tensor() : v.value(), grads ? Tensor() : v.grad());
  }
  if (params) params_ = Tensor();
  if (grads) grads_ = Tensor();
}

void ParameterStore::BindParam(int i, const Tensor& value, const Tensor& grad) {
  CheckFinalized();
  vars_.at(i).Rebind(value, grad);
}

void ParameterStore::Initialize(uint64_t init_seed) {
  CheckFinalized();
  for (const ParamInfo& p : infos_) {
    InitValues(flat_params() + p.offset, p.numel, p.init, p.name, init_seed);
  }
}

void ParameterStore::CheckFinalized() const { LS_CHECK(finalized_) << "ParameterStore used before Finalize"; }

const autograd::Variable& ParameterStore::var(int i) const {
  CheckFinalized();
  return vars_.at(i);
}

int ParameterStore::Find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? -1 : it->second;
}

void ParameterStore::ZeroGrad() {
  CheckFinalized();
  if (!grads_.defined()) return;
  std::memset(flat_grads(), 0, static_cast<size_t>(numel_) * sizeof(float));
}

}  // namespace lockstep::nn
