// DataParallel: gradient synchronization for data-parallel training (PyTorch DDP).
//
// Default mode: gradients are grouped into buckets (grad_buckets.h); the tape's
// gradient-ready hook counts down each bucket and, when its last parameter's gradient is
// final, starts an in-place asynchronous allreduce (sum) of that bucket while backward goes
// on computing earlier layers. Finish() waits for all buckets. Callers scale the loss by
// micro_batch / global_batch, so the sum over ranks is the global-batch mean gradient.
// Gradient accumulation: only the last micro-batch's backward is Arm()ed.
//
// Deterministic mode: the caller computes one gradient per canonical micro-shard into
// consecutive contribution slots and SyncDeterministic() sums them with the communicator's
// world-size-independent tree (docs/deterministic-data-parallel.md).
//
// Used by one rank thread; the hook runs on that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "lockstep/autograd/tape.h"
#include "lockstep/comm/communicator.h"
#include "lockstep/nn/parameter_store.h"
#include "lockstep/parallel/grad_buckets.h"
#include "lockstep/trace/trace.h"

namespace lockstep::parallel {

// Timings of one step's gradient synchronization, in milliseconds.
struct SyncTimes {
  double comm_ms = 0;     // first bucket launched -> last bucket completed
  double exposed_ms = 0;  // time Finish() blocked: communication not hidden behind backward
  int buckets = 0;
};

class DataParallel {
 public:
  DataParallel(std::shared_ptr<comm::Communicator> comm, nn::ParameterStore* params, int64_t bucket_bytes);

  // Copies rank 0's parameters to every rank (DDP does this at construction).
  Status BroadcastParameters();

  // Makes the next Backward on `tape` launch bucket allreduces as gradients become final.
  void Arm(autograd::Tape& tape);
  // Removes the hook (micro-batches that only accumulate).
  void Disarm(autograd::Tape& tape);
  // Waits for every bucket of the armed backward; all must have been launched.
  Status Finish(SyncTimes* times);

  // Sums `contributions` (shards_per_rank x numel floats, this rank's canonical shards in
  // order) over all ranks into the gradient buffer with the fixed-tree reduction.
  Status SyncDeterministic(const float* contributions, int64_t total_shards, SyncTimes* times);

  // Records one "allreduce" event per bucket from launch to completion. Completion is seen
  // by polling at each later gradient-ready hook and in Finish(), so an event may end a
  // little after the transfer really did. nullptr: no tracing.
  void set_trace(trace::TraceRecorder* trace) { trace_ = trace; }

  // train.grad_dtype = bf16: each bucket is rounded to bf16 into a staging buffer (counted as
  // gradient memory, 2 bytes a parameter) and reduced as bf16 (half the bytes; the backends
  // add in fp32 and round the sums), and Finish() widens the result back into the gradients.
  void set_bf16_reduction(bool on) { bf16_ = on; }
  // Called on the issuing thread just before the armed backward's last bucket is launched:
  // the end of this rank's backward, while its peers still wait for that bucket (the
  // runtime's slow fault sleeps there). Empty: nothing.
  void set_before_last_launch(std::function<void()> fn) { before_last_launch_ = std::move(fn); }

  const BucketPlan& plan() const { return plan_; }
  comm::Communicator& comm() { return *comm_; }

 private:
  void OnParamReady(int param);
  void PollCompleted();

  std::shared_ptr<comm::Communicator> comm_;
  nn::ParameterStore* params_;
  BucketPlan plan_;
  std::vector<int> pending_;  // per bucket: parameters not yet ready
  std::vector<comm::WorkHandle> work_;
  std::vector<int64_t> launch_ns_, done_ns_;
  int launched_ = 0;
  int64_t first_launch_ns_ = 0;
  trace::TraceRecorder* trace_ = nullptr;
  bool bf16_ = false;
  tensor::Tensor staging_;  // bf16 buckets in flight
  std::function<void()> before_last_launch_;
};

}  // namespace lockstep::parallel
