// Tape: records the ops of one forward pass and runs their backward closures in reverse.
//
// One tape per rank thread, passed explicitly to every forward function (no globals).
// A forward op computes its output, then, when ShouldRecord() says a gradient is wanted,
// Record()s a closure that accumulates into the gradients of its inputs. Backward(loss,
// scale) seeds d(loss) = scale and runs the closures newest first; it then releases them
// and recycles the step's activation buffers (see BufferPool), so a tape is ready for the
// next step as soon as Backward returns. Clear() does the same without running anything
// (an evaluation pass, an abandoned step).
//
// Gradient-ready hook (data parallelism starts a bucket's allreduce from it while backward
// is still running): while recording, the tape counts for each parameter how many ops will
// accumulate into its gradient; during Backward it decrements after each op's closure, and
// when the count reaches zero the parameter's gradient is final and the hook fires with
// its index. A parameter used several times (tied weights) fires once, after its last use.
// Parameters no recorded op touched fire once at the end of Backward, in index order, and
// are listed by UnusedParams(), so a DDP bucket never waits for them. DeclareParams(n)
// tells the tape how many parameters exist (indices 0..n-1); the trainer calls it before a
// model's Loss() (parallel::WholeModel, GptShard). Every declared parameter is reported
// exactly once per Backward.
//
// No-grad mode (evaluation, generation): set_grad_enabled(false) or a NoGradGuard; then
// ShouldRecord() is false, outputs do not require grad and nothing is recorded, but the
// tape still lends its BufferPool so forward passes reuse buffers.
//
// Not thread-safe. The hook runs on the thread that calls Backward.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "lockstep/autograd/buffer_pool.h"
#include "lockstep/autograd/variable.h"

namespace lockstep::autograd {

class Tape {
 public:
  using BackwardFn = std::function<void()>;
  using ParamReadyHook = std::function<void(int param_index)>;

  Tape() = default;
  // A tape that draws buffers from another tape's pool and never recycles it: activation
  // recompute (autograd/recompute.h) runs a block's forward and backward on such a tape
  // inside the outer tape's backward, sharing its buffers.
  explicit Tape(BufferPool* borrowed) : pool_(borrowed), borrowed_(true) {}
  // From now on draws from `pool` (never recycling it), or from its own pool again when null.
  // A model's evaluation tape borrows the training tape's pool: evaluation runs between steps,
  // when that pool's buffers are all free, so validation needs no memory of its own (with a
  // pool of its own it held a few layers' buffers on top of the training step's, and kept
  // them between evaluations). Only while nothing is recorded.
  void BorrowPool(BufferPool* pool);
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;
  ~Tape();

  bool grad_enabled() const { return grad_enabled_; }
  void set_grad_enabled(bool on) { grad_enabled_ = on; }

  // True when an op over `inputs` must be recorded: gradients are enabled and at least
  // one input requires grad. The op's output requires grad exactly when this is true.
  bool ShouldRecord(std::initializer_list<const Variable*> inputs) const;

  // A new activation of `shape` (contents uninitialised) from the pool.
  Variable NewActivation(const tensor::Shape& shape, bool requires_grad);
  // A buffer an op saves for its backward (statistics, indices, probabilities).
  tensor::Tensor NewBuffer(const tensor::Shape& shape, tensor::DType dtype = tensor::DType::kF32);
  BufferPool& pool() { return *pool_; }

  // Records an op. `grad_targets` are the inputs whose gradients `fn` may accumulate into;
  // parameters among them are counted for the gradient-ready hook (a parameter listed
  // twice counts twice). Only call when ShouldRecord() was true.
  void Record(std::initializer_list<Variable> grad_targets, BackwardFn fn);
  // The same for ops over a run-time number of inputs (tensor-parallel slices).
  void Record(const std::vector<Variable>& grad_targets, BackwardFn fn);

  void DeclareParams(int num_params);
  void SetParamReadyHook(ParamReadyHook hook) { hook_ = std::move(hook); }

  // loss must hold exactly one element. Seeds d(loss) = grad_scale (the trainer passes
  // 1/accumulation_steps, a loss scale, ...), runs every closure newest first, fires the
  // hook for every declared parameter, then releases the ops (as Clear()).
  void Backward(const Variable& loss, float grad_scale);
  // Backward from a non-scalar output (a pipeline stage's activation): `grad` (same numel as
  // `output`) is accumulated into output's gradient, then everything runs as in Backward.
  // An output that does not require grad (nothing recorded) only fires the hook.
  void BackwardFrom(const Variable& output, const float* grad);
  // Drops recorded ops and recycles activation buffers without running anything.
  void Clear();

  // Parameters that no op accumulated into during the last Backward, ascending.
  const std::vector<int>& UnusedParams() const { return unused_; }
  int64_t num_ops() const { return static_cast<int64_t>(ops_.size()); }

  class NoGradGuard {
   public:
    explicit NoGradGuard(Tape& tape) : tape_(tape), prev_(tape.grad_enabled()) { tape.set_grad_enabled(false); }
    ~NoGradGuard() { tape_.set_grad_enabled(prev_); }
    NoGradGuard(const NoGradGuard&) = delete;
    NoGradGuard& operator=(const NoGradGuard&) = delete;

   private:
    Tape& tape_;
    bool prev_;
  };

 private:
  struct Op {
    BackwardFn fn;
    std::vector<int> params;  // parameter indices this op accumulates into
  };
  void EnsureParam(int index);
  void RecordOp(const Variable* begin, const Variable* end, BackwardFn fn);
  void RunBackward();

  std::vector<Op> ops_;
  std::vector<int> pending_;  // per parameter: recorded ops not yet run
  std::vector<int> unused_;
  int num_params_ = 0;
  ParamReadyHook hook_;
  BufferPool own_pool_;
  BufferPool* pool_ = &own_pool_;
  bool borrowed_ = false;
  bool grad_enabled_ = true;
  bool in_backward_ = false;
};

}  // namespace lockstep::autograd
