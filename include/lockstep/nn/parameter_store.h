// ParameterStore: every parameter of a model in ONE flat fp32 buffer, every gradient in
// ONE flat fp32 buffer of the same layout, with one view per parameter (llm.c style). The
// optimizer is then a loop over a flat array, a DDP bucket or ZeRO shard is an element
// range, and a checkpoint is (name, offset, numel) entries.
//
// Layout: parameters are packed in registration order (= forward order) with no padding,
// so offset(i+1) == offset(i) + numel(i) and numel() is both the parameter count and the
// length of each flat buffer. The buffers themselves are 64-byte aligned; a view is
// 64-byte aligned whenever the sizes before it are multiples of 16 floats (true for every
// gpt-tiny tensor; not needed by any kernel).
//
// Initialisation is a pure function of (init_seed, parameter name, element index): element
// j of parameter "p" takes counter j of the Philox stream Xxh64("p") under init_seed. The
// values are therefore identical whatever the world size, the layout, the registration
// order or which rank initialises which shard.
//
// Use: register with Add() during model construction, then Finalize() once; views are
// valid for the store's lifetime. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockstep/autograd/variable.h"
#include "lockstep/tensor/tensor.h"

namespace lockstep::nn {

struct Init {
  enum class Kind { kZeros, kOnes, kNormal, kUniform };
  Kind kind = Kind::kZeros;
  float scale = 0.0f;  // kNormal: standard deviation; kUniform: bound b of U(-b, b)

  static Init Zeros() { return {Kind::kZeros, 0.0f}; }
  static Init Ones() { return {Kind::kOnes, 0.0f}; }
  static Init Normal(float std) { return {Kind::kNormal, std}; }
  static Init Uniform(float bound) { return {Kind::kUniform, bound}; }
};

struct ParamInfo {
  std::string name;  // hierarchical: "blocks.0.qkv.weight"
  tensor::Shape shape;
  Init init;
  bool decay = false;  // weight decay applies (matrices, embeddings; not biases/LayerNorm)
  int64_t offset = 0;  // in elements, into flat_params() / flat_grads()
  int64_t numel = 0;
};

class ParameterStore {
 public:
  ParameterStore() = default;
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  // Registers a parameter and returns its index. Only before Finalize(); names are unique.
  int Add(std::string name, tensor::Shape shape, Init init, bool decay);
  // Allocates the two flat buffers (MemoryTag::kParameter / kGradient), creates the views,
  // initialises values from init_seed and zeroes gradients.
  void Finalize(uint64_t init_seed);
  // Finalize without initialising values (they are uninitialised): for models whose
  // parameters are pieces of larger tensors and initialise them by global element index.
  void Allocate();
  // Finalize for ZeRO: with `params` false no flat value buffer, with `grads` false no flat
  // gradient buffer is allocated; the views of what is missing stay unbound (undefined
  // tensors) until BindParam gives them storage. Values are not initialised.
  void AllocatePartial(bool params, bool grads);
  // Drops the flat buffers whose flag is true (their views become unbound): a model built
  // whole and then sharded by ZeRO.
  void DetachStorage(bool params, bool grads);
  // Points parameter i's value and gradient views at other storage (either may be undefined).
  void BindParam(int i, const tensor::Tensor& value, const tensor::Tensor& grad);
  bool has_flat_params() const { return params_.defined(); }
  bool has_flat_grads() const { return grads_.defined(); }
  // Re-initialises all values from `init_seed` (as Finalize did).
  void Initialize(uint64_t init_seed);
  bool finalized() const { return finalized_; }

  int size() const { return static_cast<int>(infos_.size()); }
  const ParamInfo& info(int i) const { return infos_.at(i); }
  const std::vector<ParamInfo>& infos() const { return infos_; }  // registration order
  std::vector<ParamInfo>::const_iterator begin() const { return infos_.begin(); }
  std::vector<ParamInfo>::const_iterator end() const { return infos_.end(); }

  // The parameter as an autograd Variable (value and grad are views). After Finalize().
  const autograd::Variable& var(int i) const;
  const tensor::Tensor& value(int i) const { return var(i).value(); }
  const tensor::Tensor& grad(int i) const { return var(i).grad(); }
  // Index of `name`, or -1.
  int Find(std::string_view name) const;

  int64_t numel() const { return numel_; }
  // nullptr when the buffer was not allocated (ZeRO).
  float* flat_params() { return params_.defined() ? params_.data<float>() : nullptr; }
  const float* flat_params() const { return params_.defined() ? params_.data<float>() : nullptr; }
  float* flat_grads() { return grads_.defined() ? grads_.data<float>() : nullptr; }
  const float* flat_grads() const { return grads_.defined() ? grads_.data<float>() : nullptr; }
  // The flat buffers as 1-D tensors of numel() elements.
  const tensor::Tensor& params_tensor() const { return params_; }
  const tensor::Tensor& grads_tensor() const { return grads_; }

  // Zeroes the flat gradient buffer (nothing when there is none).
  void ZeroGrad();

 private:
  void CheckFinalized() const;

  std::vector<ParamInfo> infos_;
  std::unordered_map<std::string, int> by_name_;
  std::vector<autograd::Variable> vars_;
  tensor::Tensor params_;
  tensor::Tensor grads_;
  int64_t numel_ = 0;
  bool finalized_ = false;
};

// Fills `out` (n elements) with init values of parameter `name`: element j uses counter
// j of stream Xxh64(name) under `seed`. Exposed for tests and sharded initialisation.
void InitValues(float* out, int64_t n, const Init& init, std::string_view name, uint64_t seed,
                int64_t first_element = 0);

}  // namespace lockstep::nn
