#include "lockstep/runtime/setup/resume.h"

#include "lockstep/checkpoint/resolve.h"
#include "lockstep/core/log.h"

namespace lockstep::runtime {

Result<std::string> ResolveResume(const std::string& resume, const std::string& out_dir) {
  if (resume.empty()) return std::string();
  if (resume == "auto") {
    const std::string root = out_dir + "/checkpoints";
    Result<std::string> found = checkpoint::FindNewestValid(root, nullptr);
    if (found.ok()) return found;
    if (found.status().code() != StatusCode::kNotFound) return found.status();
    LS_LOG(INFO) << "--resume auto: no valid checkpoint under " << root << ", starting from step 0";
    return std::string();
  }
  return checkpoint::ResolveCheckpointPath(resume);
}

}  // namespace lockstep::runtime
