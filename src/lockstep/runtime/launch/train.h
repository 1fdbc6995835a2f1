// RunTrain: `lockstep train`. Plans the run, then runs one worker per rank — as threads of
// this process (threads backend) or as this process inside mpirun (mpi backend).
#pragma once

#include "lockstep/core/status.h"
#include "lockstep/runtime/launch/train_options.h"

namespace lockstep::runtime {

Status RunTrain(const TrainOptions& options);

}  // namespace lockstep::runtime
