// Heartbeat: how a supervised worker shows it is alive. The supervisor sets
// LOCKSTEP_HEARTBEAT_DIR; each rank then touches <dir>/rank-R (its modification time is the
// beat) after setup, after every step, validation and checkpoint. The supervisor treats a
// rank whose file is older than its heartbeat timeout as hung. Outside a supervisor Beat()
// does nothing. A file's mtime works across processes, mpirun ranks and (on a shared file
// system) machines, and costs one system call per step.
#pragma once

#include <string>

#include "lockstep/runtime/setup/worker_env.h"

namespace lockstep::runtime {

class Heartbeat {
 public:
  explicit Heartbeat(int rank);  // reads LOCKSTEP_HEARTBEAT_DIR
  void Beat() const;
  bool enabled() const { return !path_.empty(); }

 private:
  std::string path_;
};

}  // namespace lockstep::runtime
