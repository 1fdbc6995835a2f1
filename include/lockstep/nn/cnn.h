// Cnn: DESIGN.md's cnn-fashion network, the same architecture as the PyTorch peer
// (shared/peers/torch_cnn.py) for [N, 1, 28, 28] images and 10 classes:
//   conv1 1->32 3x3 pad 1, ReLU, maxpool 2, conv2 32->64 3x3 pad 1, ReLU, maxpool 2,
//   flatten (C, H, W order), fc 3136->10.   50,186 parameters.
// Init: PyTorch's defaults (kaiming-uniform a=sqrt(5), i.e. U(+-1/sqrt(fan_in)) for weights
// and biases) from the counter RNG. Parameter names: conv1.{weight,bias},
// conv2.{weight,bias}, fc.{weight,bias}.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/nn/conv2d.h"
#include "lockstep/nn/linear.h"
#include "lockstep/nn/model.h"

namespace lockstep::nn {

struct CnnConfig {
  uint64_t init_seed = 0;
};

inline constexpr int64_t kCnnImageSize = 28;
inline constexpr int64_t kCnnClasses = 10;
inline constexpr int64_t kCnnParamCount = 50186;

class Cnn : public Model {
 public:
  explicit Cnn(const CnnConfig& c);

  ParameterStore& params() override { return ps_; }
  const ParameterStore& params() const override { return ps_; }
  // in.features [batch, 1, 28, 28], in.labels [batch].
  autograd::Variable Loss(autograd::Tape& tape, const ModelInput& in) override;
  EvalResult Evaluate(const ModelInput& in) override;
  void set_eval_pool(autograd::BufferPool* pool) override { eval_tape_.BorrowPool(pool); }
  double TrainFlopsPerSample() const override;
  std::string name() const override { return "cnn"; }
  // Images of 28 x 28 = 784 features and a label in [0, 10).
  Status CheckLayout(const SampleLayout& layout) const override;

  // Logits [batch, 10].
  autograd::Variable Logits(autograd::Tape& tape, const float* images, int64_t batch);

 private:
  ParameterStore ps_;
  Conv2d conv1_, conv2_;
  Linear fc_;
  autograd::Tape eval_tape_;
};

}  // namespace lockstep::nn
