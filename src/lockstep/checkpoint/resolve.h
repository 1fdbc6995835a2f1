// Finding a checkpoint to resume from under a root (<out>/checkpoints).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/checkpoint/env.h"
#include "lockstep/core/result.h"

namespace lockstep::checkpoint {

// Complete checkpoint directories (canonical step-XXXXXXXX names) as (step, path), ascending.
// NotFound when root does not exist.
Result<std::vector<std::pair<int64_t, std::string>>> ListCheckpoints(const std::string& root, Env* env = nullptr);

// The directory `root/latest` names (checked to be a step-XXXXXXXX name that exists; not
// opened or verified). NotFound when there is no `latest` or it names a missing directory.
Result<std::string> ResolveLatest(const std::string& root, Env* env = nullptr);

// What a user may name as a checkpoint, resolved to its step directory: a step directory
// itself, a checkpoints root (meaning the checkpoint its `latest` names), the `latest` file, or
// a run directory (meaning <dir>/checkpoints/latest). Every command that takes a checkpoint
// (eval, sample, export, inspect, --resume, --init-from lockstep:) goes through this. A path
// that is none of these is returned unchanged, for the reader to reject with its own message.
Result<std::string> ResolveCheckpointPath(const std::string& path, Env* env = nullptr);

// For --resume auto: the newest checkpoint (by step) that opens and verifies every checksum.
// Each one skipped adds a line "skipping checkpoint DIR: <why>" to *skipped_warnings (may be
// null) and logs it as a warning. NotFound when none is valid.
Result<std::string> FindNewestValid(const std::string& root, std::vector<std::string>* skipped_warnings,
                                    Env* env = nullptr);

}  // namespace lockstep::checkpoint
