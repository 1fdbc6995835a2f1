// Model: what the trainer sees of a network. Parameters live in one ParameterStore (flat
// buffers); Loss() runs the forward pass on a caller-owned tape, and the trainer calls
// tape.Backward(loss, scale) itself so gradient accumulation and data parallelism choose
// the scale and observe the gradient-ready hook.
//
// A Model is used by one rank thread (oneDNN plans and the evaluation buffer pool are
// per thread). Gpt additionally offers Generate(); reach it with dynamic_cast<Gpt*>.
//
// Public API (docs/api.md): a user's model derives from Model, registers its parameters in a
// ParameterStore, and writes Loss() with lockstep's layers and ops; the tape records backward.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/autograd/tape.h"
#include "lockstep/core/config.h"
#include "lockstep/core/result.h"
#include "lockstep/core/sample_layout.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::nn {

// One batch, caller-owned, contiguous, with the fields of the data's SampleLayout (the others
// are null). Language models: tokens and targets [batch, seq] (a target < 0 is ignored).
// Classifiers: features (the CNN: images [batch, 1, 28, 28]) and labels [batch]. Regression:
// features [batch, layout.features] and values [batch, layout.values].
struct ModelInput {
  const int32_t* tokens = nullptr;
  const int32_t* targets = nullptr;
  const float* features = nullptr;
  const int32_t* labels = nullptr;
  const float* values = nullptr;
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

  // Mean loss over the batch, recorded on `tape` (unless its gradients are disabled). The
  // trainer has declared the parameter count to the tape already (parameters the loss does
  // not touch are reported ready at the end of backward). The input must stay valid until
  // backward.
  // The returned Variable's value (loss.data()[0]) stays valid after tape.Backward for as
  // long as the caller holds it.
  virtual autograd::Variable Loss(autograd::Tape& tape, const ModelInput& in) = 0;
  // Forward only. The default runs Loss() on a no-grad tape and counts every row (loss_sum =
  // mean loss x batch, no accuracy); classifiers override it to count correct rows.
  virtual EvalResult Evaluate(const ModelInput& in);
  // Evaluate draws its buffers from `pool` (the training tape's, free between steps) instead
  // of a pool of its own; null goes back to its own. Models that keep no evaluation tape
  // ignore it.
  virtual void set_eval_pool(autograd::BufferPool* pool) {}

  // Forward + backward FLOPs of one sample (a sequence, an image): 3x the forward
  // matmul/convolution FLOPs (2 per multiply-accumulate), attention QK^T and AV counted
  // over the full T x T square, as PyTorch computes them. 0 (the default): unknown, the
  // metrics' gflops column is then 0.
  virtual double TrainFlopsPerSample() const { return 0.0; }
  virtual std::string name() const = 0;

  // Whether the model can train on samples of this layout; checked before any worker starts
  // (InvalidArgument naming what the model expects). The default accepts anything.
  virtual Status CheckLayout(const SampleLayout& layout) const { return Status::Ok(); }
};

// Builds the model named by config key model.kind ("gpt", "llama" or "cnn") from its model.*
// keys (docs/models.md), model.init_seed (default 0) for all. Errors are one-line
// InvalidArgument messages naming the key.
Result<std::unique_ptr<Model>> MakeModel(const Config& cfg);

struct GptConfig;
// The model.* keys of a GPT (model.kind = "gpt"), validated.
Result<GptConfig> ReadGptConfig(const Config& cfg);

struct LlamaConfig;
// The model.* keys of a Llama (model.kind = "llama"), validated.
Result<LlamaConfig> ReadLlamaConfig(const Config& cfg);

}  // namespace lockstep::nn
