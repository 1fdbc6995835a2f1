#include "lockstep/runtime/recovery/checkpoint_inspect.h"

#include <filesystem>
#include <iostream>

#include "lockstep/checkpoint/inspect.h"
#include "lockstep/checkpoint/resolve.h"

namespace lockstep::runtime {

Status InspectCheckpoint(const std::string& path) {
  // Accept what users point at: a step directory, a checkpoints root, or its `latest` file.
  std::string dir = path;
  std::filesystem::path p(path);
  if (p.filename() == "latest" && std::filesystem::is_regular_file(p)) {
    if (Result<std::string> r = checkpoint::ResolveLatest(p.parent_path().string()); r.ok())
      dir = *r;
    else
      return r.status();
  } else if (std::filesystem::is_regular_file(p / "latest")) {
    if (Result<std::string> r = checkpoint::ResolveLatest(path); r.ok())
      dir = *r;
    else
      return r.status();
  }
  Status s = checkpoint::InspectToStream(dir, std::cout);
  std::cout.flush();
  return s;
}

}  // namespace lockstep::runtime
