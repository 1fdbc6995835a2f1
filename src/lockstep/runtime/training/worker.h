// Worker: one rank's training loop — forward, backward with overlapped gradient
// synchronization, clipping, optimizer step, metrics, validation — from a RunSetup and a
// communicator. The same code runs as a thread (threads backend) or as a process (mpi).
#pragma once

#include <memory>

#include "lockstep/comm/communicator.h"
#include "lockstep/runtime/setup/run_setup.h"

namespace lockstep::runtime {

// Runs the whole training of this rank. Rank 0 writes metrics.jsonl and the progress display.
Status RunWorker(const RunSetup& setup, std::shared_ptr<comm::Communicator> comm);

}  // namespace lockstep::runtime
