#include "lockstep/cli/inspect.h"

#include <iostream>

#include "lockstep/checkpoint/inspect.h"
#include "lockstep/checkpoint/resolve.h"

namespace lockstep::cli {

Status InspectCheckpoint(const std::string& path) {
  LS_ASSIGN_OR_RETURN(std::string dir, checkpoint::ResolveCheckpointPath(path));
  Status s = checkpoint::InspectToStream(dir, std::cout);
  std::cout.flush();
  return s;
}

}  // namespace lockstep::cli
