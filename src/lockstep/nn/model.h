// Model: what the trainer sees of a network. Parameters live in one ParameterStore (flat
// buffers); Loss() runs the forward pass on a caller-owned tape, and the trainer calls
// tape.Backward(loss, scale) itself so gradient accumulation and data parallelism choose
// the scale and observe the gradient-ready hook.
//
// A Model is used by one rank thread (oneDNN plans and the evaluation buffer pool are
// per thread). Gpt additionally offers Generate(); reach it with dynamic_cast<Gpt*>.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/autograd/tape.h"
#include "lockstep/core/config.h"
#include "lockstep/core/result.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::nn {

// One batch, caller-owned, contiguous. Language models: tokens and targets [batch, seq]
// (a target < 0 is ignored). Classifiers: images [batch, C, H, W] and labels [batch].
struct ModelInput {
  const int32_t* tokens = nullptr;
  const int32_t* targets = nullptr;
  const float* images = nullptr;
  const int32_t* labels = nullptr;
  int64_t batch = 0, seq = 0;
};

struct EvalResult {
  double loss_sum = 0.0;  // sum of per-row (token or image) losses
  int64_t count = 0;      // rows counted
  int64_t correct = 0;    // rows whose argmax is the target
};

class Model {
 public:
  virtual ~Model() = default;

  virtual ParameterStore& params() = 0;
  virtual const ParameterStore& params() const = 0;

  // Mean loss over the batch, recorded on `tape` (unless its gradients are disabled).
  // Declares the parameter count to the tape. The input must stay valid until backward.
  // The returned Variable's value (loss.data()[0]) stays valid after tape.Backward for as
  // long as the caller holds it.
  virtual autograd::Variable Loss(autograd::Tape& tape, const ModelInput& in) = 0;
  // Forward only, on an internal no-grad tape whose buffers are reused between calls.
  virtual EvalResult Evaluate(const ModelInput& in) = 0;

  // Forward + backward FLOPs of one sample (a sequence, an image): 3x the forward
  // matmul/convolution FLOPs (2 per multiply-accumulate), attention QK^T and AV counted
  // over the full T x T square, as PyTorch computes them.
  virtual double TrainFlopsPerSample() const = 0;
  virtual std::string name() const = 0;
};

// Builds the model named by config key model.kind ("gpt" or "cnn"). Keys read: model.kind;
// for gpt model.vocab, model.context, model.layers, model.heads, model.width,
// model.mlp_ratio; for both model.init_seed (default 0). Errors are one-line
// InvalidArgument messages naming the key.
Result<std::unique_ptr<Model>> MakeModel(const Config& cfg);

struct GptConfig;
// The model.* keys of a GPT (model.kind = "gpt"), validated.
Result<GptConfig> ReadGptConfig(const Config& cfg);

}  // namespace lockstep::nn
