// StageModel: what the trainer sees of one rank's part of a model under any layout — the
// layers of its pipeline stage, split over its tensor-parallel group. Its ParameterStore
// holds only the local tensors (one flat buffer, as for a whole model), and placements()
// says where each sits in the canonical tensor of the same name, which is all that
// checkpoints, the weights hash and resharding loads need.
//
// A stage's Forward consumes the batch (first stage) or the previous stage's activation, and
// returns the next activation or, on the last stage, the mean loss. Without pipeline
// parallelism the one stage is both first and last and Forward is the whole model's loss.
//
// ZeRO-3 needs to materialise a layer's parameters just before it runs; models report their
// layer groups ("units", in forward order, contiguous in the flat buffer) and call the
// installed UnitHooks around each one (see parallel/zero_units.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lockstep/autograd/tape.h"
#include "lockstep/nn/model.h"
#include "lockstep/parallel/placement.h"

namespace lockstep::parallel {

// Called by a model around the forward of each unit; Enter/Exit also record tape markers so
// that the backward pass calls back in reverse (see zero_units.h). Implemented by ZeRO-3/2.
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void Enter(autograd::Tape& tape, int unit) = 0;
  virtual void Exit(autograd::Tape& tape, int unit) = 0;
};

struct ParamUnit {
  int first_param = 0, end_param = 0;  // parameter indices [first, end) of the local store
};

class StageModel {
 public:
  virtual ~StageModel() = default;

  virtual nn::ParameterStore& params() = 0;
  virtual const nn::ParameterStore& params() const = 0;
  // One per local parameter, same index.
  virtual const std::vector<TensorPlacement>& placements() const = 0;
  virtual std::vector<ParamUnit> units() const = 0;
  virtual void set_unit_hooks(UnitHooks* hooks) = 0;

  virtual bool first_stage() const = 0;
  virtual bool last_stage() const = 0;
  // The activation passed to the next stage for a batch of `in`'s shape.
  virtual tensor::Shape ActivationShape(const nn::ModelInput& in) const = 0;

  // First stage: reads `in` (x ignored); others: x is the previous stage's output (a leaf that
  // requires grad, so its gradient can be sent back). Last stage: returns the mean loss over
  // in's targets; others: the activation for the next stage.
  virtual autograd::Variable Forward(autograd::Tape& tape, const nn::ModelInput& in, const autograd::Variable& x) = 0;
  // Forward without gradients. Non-last stages write the activation into `out`
  // (ActivationShape floats) and return {}; the last stage returns the loss statistics.
  virtual nn::EvalResult Evaluate(const nn::ModelInput& in, const float* x, float* out) = 0;
  // As nn::Model::set_eval_pool.
  virtual void set_eval_pool(autograd::BufferPool* pool) = 0;

  virtual std::string name() const = 0;
  // The local tensor tied across the pipeline (a tied embedding on the first stage, its copy
  // on the last), whose gradient the trainer sums between the two stages; -1 for none.
  virtual int TiedParam() const { return -1; }
  // Forward + backward FLOPs of one sample of the WHOLE model (throughput figures).
  virtual double TrainFlopsPerSample() const = 0;
};

// A whole nn::Model as the single stage of a data-parallel layout (the CNN, and any model
// without tensor/pipeline support): placements are the tensors themselves, one unit.
class WholeModel : public StageModel {
 public:
  explicit WholeModel(std::unique_ptr<nn::Model> model);

  nn::ParameterStore& params() override { return model_->params(); }
  const nn::ParameterStore& params() const override { return model_->params(); }
  const std::vector<TensorPlacement>& placements() const override { return placements_; }
  std::vector<ParamUnit> units() const override { return {{0, model_->params().size()}}; }
  void set_unit_hooks(UnitHooks* hooks) override { hooks_ = hooks; }
  bool first_stage() const override { return true; }
  bool last_stage() const override { return true; }
  tensor::Shape ActivationShape(const nn::ModelInput&) const override { return {}; }
  autograd::Variable Forward(autograd::Tape& tape, const nn::ModelInput& in, const autograd::Variable& x) override;
  nn::EvalResult Evaluate(const nn::ModelInput& in, const float* x, float* out) override;
  void set_eval_pool(autograd::BufferPool* pool) override { model_->set_eval_pool(pool); }
  std::string name() const override { return model_->name(); }
  double TrainFlopsPerSample() const override { return model_->TrainFlopsPerSample(); }
  nn::Model& model() { return *model_; }

 private:
  std::unique_ptr<nn::Model> model_;
  std::vector<TensorPlacement> placements_;
  UnitHooks* hooks_ = nullptr;
};

}  // namespace lockstep::parallel
