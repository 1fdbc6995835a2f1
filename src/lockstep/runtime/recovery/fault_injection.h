// Fires an --inject-fault (setup/fault_spec.h) when it is due. The faults are real: the chosen
// rank sends SIGKILL to its own process (with the threads backend that is the whole job; with
// MPI, one rank's process, which mpirun then reports), or stops making progress (hang, for the
// supervisor's heartbeat timeout).
#pragma once

#include <cstdint>

#include "lockstep/runtime/setup/fault_spec.h"

namespace lockstep::runtime {

// Fire the fault if it is due: at the start of 0-based step `step` on `rank`, or while
// `rank` writes the checkpoint of step `step`. Fires at most once per process.
void InjectAtStep(const FaultSpec& spec, int rank, int64_t step);
void InjectDuringCheckpoint(const FaultSpec& spec, int rank, int64_t step);

}  // namespace lockstep::runtime
