// RunTrain: sets up the run, then runs one worker per rank — as threads of this process (threads
// backend) or as this process inside mpirun (mpi backend). The supervisor and the relaunch
// under mpirun come before it (lockstep/train.h).
#pragma once

#include "lockstep/core/status.h"
#include "lockstep/job.h"
#include "lockstep/train_options.h"

namespace lockstep::runtime {

Status RunTrain(const Job& job, const TrainOptions& options);

}  // namespace lockstep::runtime
