// RunWorker: one rank's whole run, around the Trainer (trainer.h).
#include "lockstep/runtime/training/worker.h"

#include <string>

#include "lockstep/core/log.h"
#include "lockstep/runtime/training/trainer.h"
#include "lockstep/tensor/memory.h"

namespace lockstep::runtime {

Status RunWorker(const RunSetup& setup, std::shared_ptr<comm::Communicator> comm) {
  if (comm->size() > 1) log::SetThreadPrefix("[rank " + std::to_string(comm->rank()) + "] ");
  // Each rank counts its own tensors (ranks may be threads of one process). The trainer and
  // every tensor it owns are gone before the tracker is.
  tensor::MemoryTracker memory;
  memory.SetLimit(setup.options.mem_limit);
  tensor::ScopedTracker scope(&memory);
  Status s;
  {
    Trainer trainer(setup, comm, &memory);
    s = trainer.Run();
  }
  // A failed rank must not leave its peers blocked in a collective until the timeout.
  if (!s.ok()) comm->Abort(s);
  return s;
}

}  // namespace lockstep::runtime
