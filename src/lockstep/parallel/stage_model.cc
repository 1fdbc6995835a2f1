#include "lockstep/parallel/stage_model.h"

namespace lockstep::parallel {

WholeModel::WholeModel(std::unique_ptr<nn::Model> model) : model_(std::move(model)) {
  for (const nn::ParamInfo& p : model_->params()) placements_.push_back(TensorPlacement::Whole(p.name, p.shape));
}

autograd::Variable WholeModel::Forward(autograd::Tape& tape, const nn::ModelInput& in, const autograd::Variable&) {
  // Every parameter reaches the gradient-ready hook, those the loss never touches included
  // (they are reported at the end of Backward): the model's Loss() need not declare them.
  tape.DeclareParams(model_->params().size());
  if (hooks_) hooks_->Enter(tape, 0);
  autograd::Variable loss = model_->Loss(tape, in);
  if (hooks_) hooks_->Exit(tape, 0);
  return loss;
}

nn::EvalResult WholeModel::Evaluate(const nn::ModelInput& in, const float*, float*) {
  autograd::Tape tape;  // unit hooks only materialise parameters here (no grad, no markers)
  tape.set_grad_enabled(false);
  if (hooks_) hooks_->Enter(tape, 0);
  nn::EvalResult r = model_->Evaluate(in);
  if (hooks_) hooks_->Exit(tape, 0);
  return r;
}

}  // namespace lockstep::parallel
