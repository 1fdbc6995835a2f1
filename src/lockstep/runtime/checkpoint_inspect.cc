#include "lockstep/runtime/checkpoint_inspect.h"

#include <iostream>

#include "lockstep/checkpoint/inspect.h"

namespace lockstep::runtime {

Status InspectCheckpoint(const std::string& dir) {
  Status s = checkpoint::InspectToStream(dir, std::cout);
  std::cout.flush();
  return s;
}

}  // namespace lockstep::runtime
