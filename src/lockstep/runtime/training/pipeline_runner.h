// PipelineRunner: executes one rank's pipeline stage for a training step — the forward and
// backward passes of every micro-batch in the order parallel::StageSchedule gives (GPipe or
// 1F1B), receiving activations from the previous stage and gradients from the next one over
// the pipeline communicator, and sending its own on.
//
// Each in-flight micro-batch has its own tape (a stage holds at most MaxInFlight of them, the
// reason 1F1B exists), reused once its backward ran. Sends are asynchronous and waited for
// before their buffers are released, so a stage computes while its activation travels.
// Messages: activation of micro i has tag 2i, its gradient 2i+1 (in order per peer and tag).
//
// Timing: busy_ms is the time spent inside forward and backward passes, total_ms the whole
// schedule; 1 - busy/total is the stage's measured bubble (idle waiting for neighbours),
// against (p-1)/(m+p-1) for equal stages.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "lockstep/autograd/tape.h"
#include "lockstep/comm/communicator.h"
#include "lockstep/parallel/pipeline_schedule.h"
#include "lockstep/parallel/stage_model.h"
#include "lockstep/trace/trace.h"

namespace lockstep::runtime {

struct PipelineTimes {
  double busy_ms = 0;
  double total_ms = 0;
};

class PipelineRunner {
 public:
  // pp: the pipeline group (rank = stage index). model outlives the runner.
  PipelineRunner(parallel::StageModel* model, std::shared_ptr<comm::Communicator> pp, parallel::PipeSchedule schedule);
  parallel::PipeSchedule schedule() const { return schedule_; }  // the one it runs

  struct Hooks {
    std::function<void(int micro)> before_backward;  // may be empty
    std::function<void(int micro)> after_backward;
  };
  // One step over `micros` micro-batches; input(i) gives micro-batch i's rows (every stage
  // passes the same shapes). The last stage seeds each backward with loss_scale and writes
  // the micro-batches' losses into *losses (resized to micros).
  Status Step(int micros, const std::function<nn::ModelInput(int)>& input, float loss_scale, const Hooks& hooks,
              std::vector<float>* losses, PipelineTimes* times);

  // Records each micro-batch's forward and backward as trace events (the bubble shows as
  // the gaps between them). nullptr: none.
  void set_trace(trace::TraceRecorder* trace) { trace_ = trace; }

  // --inject-fault slow: each forward and backward pass of the next steps is followed by a
  // sleep of (factor - 1) x its own time, counted as busy (1: none).
  void set_slow_factor(double factor) { slow_factor_ = factor; }

  // Forward of one evaluation batch through the stages; the last stage returns its
  // statistics, the others {}.
  Result<nn::EvalResult> Evaluate(const nn::ModelInput& in);
  // Every slot's pool lets go of its free buffers (between steps: before an evaluation whose
  // batches have another size than the micro-batches; the next step maps them again).
  void ReleaseBuffers();

 private:
  autograd::Tape& TapeFor(int slot);
  void Stretch(int64_t start_ns) const;  // the slow fault's sleep after a pass begun at start_ns

  parallel::StageModel* model_;
  std::shared_ptr<comm::Communicator> pp_;
  parallel::PipeSchedule schedule_;
  int stages_, stage_;
  std::vector<std::unique_ptr<autograd::Tape>> tapes_;
  std::vector<float> eval_in_, eval_out_;
  trace::TraceRecorder* trace_ = nullptr;
  double slow_factor_ = 1.0;
};

}  // namespace lockstep::runtime
