// InspectCheckpoint: `lockstep inspect DIR` — the manifest as a table, with checksum status.
#pragma once

#include <string>

#include "lockstep/core/status.h"

namespace lockstep::cli {

Status InspectCheckpoint(const std::string& dir);

}  // namespace lockstep::cli
