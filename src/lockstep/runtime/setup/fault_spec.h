// --inject-fault: the spec of a reproducible fault for recovery tests, and when it is due
// (recovery/fault_injection.h fires it).
//
//   kill:rank=R:step=S              SIGKILL as step S (1-based) begins on rank R
//   kill:rank=R:step=S:permanent    the same, and a lost machine: under the supervisor the
//                                   fault is passed to every attempt whose world still has a
//                                   rank R, which dies again at the first step >= S it runs
//                                   (so an elastic run, --min-nproc, must leave it behind)
//   kill:rank=R:during=checkpoint   SIGKILL on rank R while its first checkpoint is being
//                                   written (after its shard is on disk, before the commit)
//   kill:rank=R:during=checkpoint:step=S
//                                   the same, in the checkpoint of step S
//   hang:rank=R:step=S              rank R sleeps forever as step S begins
//   nan:rank=R:step=S               an inf in one element of rank R's gradient of step S (after
//                                   the gradient synchronisation, in an element rank R's
//                                   share of the global norm counts), as a real overflow would
//                                   leave it; nan:rank=R:step=S:in=loss makes the step's loss
//                                   NaN instead
//   slow:rank=R:factor=F[:step=S]   rank R's compute takes F times as long (F > 1), from step
//                                   S on (default: from the start): a straggler
//
// Under --max-restarts the supervisor injects the fault into the first attempt only (a
// permanent kill: into every attempt that has rank R).
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/core/result.h"

namespace lockstep::runtime {

struct FaultSpec {
  enum class Kind { kNone, kKill, kHang, kNan, kSlow };
  Kind kind = Kind::kNone;
  int rank = 0;
  int64_t step = 0;  // with during_checkpoint: 0 = the first checkpoint; slow: 0 = from the start
  bool during_checkpoint = false;
  bool nan_in_loss = false;  // nan: the loss instead of a gradient element
  bool permanent = false;    // kill at step: fires at the first step >= `step` (every attempt)
  double factor = 1.0;       // slow: compute time multiplier
};

// "" is no fault. InvalidArgument (one line naming the spec and the accepted forms) for
// anything else that is not one of the forms above, or a rank outside [0, world) or a step
// outside [1, total_steps].
Result<FaultSpec> ParseFaultSpec(const std::string& spec, int world, int64_t total_steps);

// Whether a kill or hang at a step is due on `rank` as 0-based step `step` begins.
bool StopDue(const FaultSpec& spec, int rank, int64_t step);
// nan: whether `rank` corrupts its gradient (or, with in=loss, its loss) in 0-based step `step`.
bool NanDue(const FaultSpec& spec, int rank, int64_t step, bool in_loss);
// slow: the factor rank `rank`'s compute is stretched by in 0-based step `step` (1: none).
double SlowFactor(const FaultSpec& spec, int rank, int64_t step);

}  // namespace lockstep::runtime
