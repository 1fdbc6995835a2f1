// Which checkpoint a run starts from (--resume), decided before any worker starts.
#pragma once

#include <string>

#include "lockstep/core/result.h"

namespace lockstep::runtime {

// --resume: "" (start fresh), "auto" (the newest checkpoint under <out>/checkpoints that
// verifies; corrupt ones are skipped with a warning; "" when there is none) or a directory
// (a step-XXXXXXXX checkpoint, or a checkpoints root whose `latest` is used). Returns the
// checkpoint directory to load, or "".
Result<std::string> ResolveResume(const std::string& resume, const std::string& out_dir);

}  // namespace lockstep::runtime
