// InspectToStream: the report behind `lockstep inspect CHECKPOINT_DIR`.
#pragma once

#include <ostream>
#include <string>

#include "lockstep/checkpoint/env.h"
#include "lockstep/core/status.h"

namespace lockstep::checkpoint {

// Prints a table of the checkpoint's tensors (name, dtype, shape, shards, bytes, checksum
// status of every shard: ok or BAD), totals, and the manifest's step, world and extra
// summary. Reads every byte to check checksums. Returns the Open error (after printing it) or,
// after printing everything, Corruption when any checksum failed.
Status InspectToStream(const std::string& dir, std::ostream& os, Env* env = nullptr);

}  // namespace lockstep::checkpoint
