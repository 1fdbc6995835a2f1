// --inject-fault: reproducible faults for recovery tests. The faults are real: the chosen rank
// sends SIGKILL to its own process (with the threads backend that is the whole job; with MPI,
// one rank's process, which mpirun then reports), or stops making progress (hang, for the
// supervisor's heartbeat timeout).
//
//   kill:rank=R:step=S              SIGKILL as step S (1-based) begins on rank R
//   kill:rank=R:during=checkpoint   SIGKILL on rank R while its first checkpoint is being
//                                   written (after its shard is on disk, before the commit)
//   kill:rank=R:during=checkpoint:step=S
//                                   the same, in the checkpoint of step S
//   hang:rank=R:step=S              rank R sleeps forever as step S begins
//
// Under --max-restarts the supervisor injects the fault into the first attempt only.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/core/result.h"

namespace lockstep::runtime {

struct FaultSpec {
  enum class Kind { kNone, kKill, kHang };
  Kind kind = Kind::kNone;
  int rank = 0;
  int64_t step = 0;  // with during_checkpoint: 0 = the first checkpoint
  bool during_checkpoint = false;
};

// "" is no fault. InvalidArgument (one line naming the spec and the accepted forms) for
// anything else that is not one of the forms above, or a rank outside [0, world) or a step
// outside [1, total_steps].
Result<FaultSpec> ParseFaultSpec(const std::string& spec, int world, int64_t total_steps);

// Fire the fault if it is due: at the start of 0-based step `step` on `rank`, or while
// `rank` writes the checkpoint of step `step`. Fires at most once per process.
void InjectAtStep(const FaultSpec& spec, int rank, int64_t step);
void InjectDuringCheckpoint(const FaultSpec& spec, int rank, int64_t step);

}  // namespace lockstep::runtime
