#include "lockstep/nn/cnn.h"

#include <cstring>

#include "lockstep/nn/activation.h"
#include "lockstep/nn/cross_entropy.h"
#include "lockstep/nn/max_pool.h"
#include "lockstep/nn/shape_ops.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

namespace {
constexpr int64_t kC1 = 32, kC2 = 64;
constexpr int64_t kFlat = kC2 * (kCnnImageSize / 4) * (kCnnImageSize / 4);  // 3136
}  // namespace

Cnn::Cnn(const CnnConfig& c) {
  conv1_ = Conv2d(ps_, "conv1", 1, kC1, 3, 1, 1);
  conv2_ = Conv2d(ps_, "conv2", kC1, kC2, 3, 1, 1);
  fc_ = Linear::TorchDefault(ps_, "fc", kFlat, kCnnClasses, /*bias=*/true);
  ps_.Finalize(c.init_seed);
  LS_CHECK(ps_.numel() == kCnnParamCount) << "Cnn parameter count " << ps_.numel();
}

Variable Cnn::Logits(Tape& tape, const float* images, int64_t batch) {
  LS_CHECK(images != nullptr && batch >= 1) << "Cnn: images [" << batch << "]";
  tensor::Tensor img = tape.NewBuffer({batch, 1, kCnnImageSize, kCnnImageSize});
  std::memcpy(img.data<float>(), images, img.nbytes());
  Variable x = Variable::Constant(img);
  x = conv1_.ForwardReluPool(tape, x);  // maxpool(relu(conv(x))) fused
  x = conv2_.ForwardReluPool(tape, x);
  return fc_.Forward(tape, ReshapeForward(tape, x, {batch, kFlat}));
}

Variable Cnn::Loss(Tape& tape, const ModelInput& in) {
  LS_CHECK(in.labels != nullptr) << "Cnn::Loss without labels";
  tape.DeclareParams(ps_.size());
  Variable logits = Logits(tape, in.features, in.batch);
  tensor::Tensor labels = tape.NewBuffer({in.batch}, tensor::DType::kI32);
  std::memcpy(labels.data<int32_t>(), in.labels, labels.nbytes());
  return SoftmaxCrossEntropyForward(tape, logits, labels);
}

EvalResult Cnn::Evaluate(const ModelInput& in) {
  LS_CHECK(in.labels != nullptr) << "Cnn::Evaluate without labels";
  EvalResult r;
  {
    Tape::NoGradGuard no_grad(eval_tape_);
    Variable logits = Logits(eval_tape_, in.features, in.batch);
    CrossEntropyStats s = SoftmaxCrossEntropyStats(logits.data(), in.labels, in.batch, kCnnClasses);
    r = {s.loss_sum, s.count, s.correct};
  }
  eval_tape_.Clear();
  return r;
}

Status Cnn::CheckLayout(const SampleLayout& layout) const {
  constexpr int64_t kPixels = kCnnImageSize * kCnnImageSize;
  if (layout.features == kPixels && layout.classes >= 1 && layout.classes <= kCnnClasses) return Status::Ok();
  return Status::InvalidArgument(
      "the cnn model trains on 28x28 images with a label in [0, 10) (features=" + std::to_string(kPixels) +
      ", classes=10), but the data's samples hold " + layout.ToString());
}

double Cnn::TrainFlopsPerSample() const {
  const double macs =
      static_cast<double>(conv1_.MacsPerSample(kCnnImageSize, kCnnImageSize) +
                          conv2_.MacsPerSample(kCnnImageSize / 2, kCnnImageSize / 2) + kFlat * kCnnClasses);
  return 3.0 * 2.0 * macs;
}

}  // namespace lockstep::nn
