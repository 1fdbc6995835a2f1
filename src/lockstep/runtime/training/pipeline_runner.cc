#include "lockstep/runtime/training/pipeline_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "lockstep/core/clock.h"

namespace lockstep::runtime {

using autograd::Variable;
using parallel::PipeOp;

namespace {

// MPI tags stop at 32767: training micro-batches use 2i and 2i+1 below it (ResolveLayout caps
// the micro-batch count), evaluation the top one.
constexpr int kEvalTag = 32767;

// What a stage keeps of one micro-batch between its forward and its backward.
struct Micro {
  autograd::Tape* tape = nullptr;
  Variable x;    // the received activation (a leaf whose gradient goes back)
  Variable out;  // the activation sent on, or the loss
  comm::WorkHandle send, grad_send;
  bool backward_done = false;
};

Status WaitFor(comm::WorkHandle& w) {
  if (!w) return Status::Ok();
  Status s = w->Wait();
  w.reset();
  return s;
}

// Lets go of the received activations (and their gradients) of the micro-batches whose gradient
// has left: held to the step's end, a stage after the first kept two [rows, T, C] tensors for
// every micro-batch of the step instead of for those in flight (gpt-tiny pp=4, 4 micro-batches:
// the last stage 6 more than its one slot needs).
Status ReleaseSent(std::vector<Micro>& st) {
  for (Micro& m : st) {
    if (!m.backward_done || !m.x.defined() || (m.grad_send && !m.grad_send->Done())) continue;
    LS_RETURN_IF_ERROR(WaitFor(m.grad_send));
    m.x = Variable();
  }
  return Status::Ok();
}

}  // namespace

PipelineRunner::PipelineRunner(parallel::StageModel* model, std::shared_ptr<comm::Communicator> pp,
                               parallel::PipeSchedule schedule)
    : model_(model), pp_(std::move(pp)), schedule_(schedule), stages_(pp_->size()), stage_(pp_->rank()) {
  model_->set_eval_pool(&TapeFor(0).pool());  // validation draws from the first slot's buffers
}

void PipelineRunner::ReleaseBuffers() {
  for (auto& tape : tapes_) tape->pool().Release();
}

void PipelineRunner::Stretch(int64_t start_ns) const {
  if (slow_factor_ <= 1.0) return;
  const auto pass = std::chrono::nanoseconds(NowNanos() - start_ns);
  std::this_thread::sleep_for(std::chrono::duration_cast<std::chrono::nanoseconds>(pass * (slow_factor_ - 1.0)));
}

autograd::Tape& PipelineRunner::TapeFor(int slot) {
  while (static_cast<int>(tapes_.size()) <= slot) tapes_.push_back(std::make_unique<autograd::Tape>());
  return *tapes_[slot];
}

Status PipelineRunner::Step(int micros, const std::function<nn::ModelInput(int)>& input, float loss_scale,
                            const Hooks& hooks, std::vector<float>* losses, PipelineTimes* times) {
  const bool first = stage_ == 0, last = stage_ == stages_ - 1;
  const int slots = parallel::MaxInFlight(schedule_, stages_, stage_, micros);
  std::vector<Micro> st(static_cast<size_t>(micros));
  if (last) losses->assign(static_cast<size_t>(micros), 0.0f);
  // The stages start and end the schedule together, so every stage's total is the pipeline's
  // makespan and 1 - busy/total its share of the bubble (otherwise the last stage, which
  // finishes first, would count less idle time than the formula does).
  LS_RETURN_IF_ERROR(pp_->Barrier()->Wait());
  Stopwatch total;
  double busy = 0;
  for (const PipeOp& op : parallel::StageSchedule(schedule_, stages_, stage_, micros)) {
    const int i = op.micro;
    Micro& m = st[static_cast<size_t>(i)];
    const nn::ModelInput in = input(i);
    LS_RETURN_IF_ERROR(ReleaseSent(st));  // before this op's buffers are drawn from the pool
    if (op.kind == PipeOp::Kind::kForward) {
      m.tape = &TapeFor(i % slots);  // micros in flight at once are consecutive: distinct slots
      if (!first) {
        m.x = m.tape->NewActivation(model_->ActivationShape(in), true);
        LS_RETURN_IF_ERROR(pp_->Recv(m.x.data(), m.x.numel(), comm::DType::kF32, stage_ - 1, 2 * i)->Wait());
      }
      const int64_t start = NowNanos();
      m.out = model_->Forward(*m.tape, in, m.x);
      Stretch(start);
      busy += (NowNanos() - start) * 1e-6;
      if (trace_) trace_->Add("forward", "pipeline", start, NowNanos());
      if (last)
        (*losses)[i] = m.out.data()[0];
      else
        m.send = pp_->Send(m.out.data(), m.out.numel(), comm::DType::kF32, stage_ + 1, 2 * i);
      continue;
    }
    tensor::Tensor grad;
    if (!last) {
      grad = m.tape->NewBuffer(model_->ActivationShape(in));
      LS_RETURN_IF_ERROR(pp_->Recv(grad.data<float>(), grad.numel(), comm::DType::kF32, stage_ + 1, 2 * i + 1)->Wait());
    }
    LS_RETURN_IF_ERROR(WaitFor(m.send));  // the activation must not be recycled mid-send
    if (hooks.before_backward) hooks.before_backward(i);
    const int64_t start = NowNanos();
    if (last)
      m.tape->Backward(m.out, loss_scale);
    else
      m.tape->BackwardFrom(m.out, grad.data<float>());
    Stretch(start);
    busy += (NowNanos() - start) * 1e-6;
    if (trace_) trace_->Add("backward", "pipeline", start, NowNanos());
    m.out = Variable();
    if (hooks.after_backward) hooks.after_backward(i);
    if (!first) {
      if (!m.x.has_grad()) (void)m.x.GradAccumulate();  // nothing flowed back: a zeroed gradient
      m.grad_send = pp_->Send(m.x.grad_data(), m.x.numel(), comm::DType::kF32, stage_ - 1, 2 * i + 1);
    }
    m.backward_done = true;
  }
  Status first_error;
  for (Micro& m : st) {
    Status a = WaitFor(m.send), b = WaitFor(m.grad_send);
    if (first_error.ok()) first_error = !a.ok() ? a : b;
  }
  if (first_error.ok()) first_error = pp_->Barrier()->Wait();
  if (times) {
    times->busy_ms = busy;
    times->total_ms = total.ElapsedMs();
  }
  return first_error;
}

Result<nn::EvalResult> PipelineRunner::Evaluate(const nn::ModelInput& in) {
  const bool first = stage_ == 0, last = stage_ == stages_ - 1;
  const int64_t n = tensor::NumElements(model_->ActivationShape(in));
  if (!first) {
    eval_in_.resize(static_cast<size_t>(n));
    LS_RETURN_IF_ERROR(pp_->Recv(eval_in_.data(), eval_in_.size(), comm::DType::kF32, stage_ - 1, kEvalTag)->Wait());
  }
  if (!last) eval_out_.resize(static_cast<size_t>(n));
  nn::EvalResult r = model_->Evaluate(in, eval_in_.data(), eval_out_.data());
  if (!last) {
    LS_RETURN_IF_ERROR(pp_->Send(eval_out_.data(), eval_out_.size(), comm::DType::kF32, stage_ + 1, kEvalTag)->Wait());
    return nn::EvalResult{};
  }
  return r;
}

}  // namespace lockstep::runtime
