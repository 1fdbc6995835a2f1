// LoaderState: the whole position of a data loader — which epoch, which global batch within
// it, and the seed its shuffles derive from. Because every permutation and window offset is
// a pure function of (seed, epoch) through the counter-based RNG, these three numbers are all
// a checkpoint needs to continue the exact sample sequence, on any world size.
#pragma once

#include <cstdint>

#include <nlohmann/json_fwd.hpp>

#include "lockstep/core/result.h"

namespace lockstep::data {

struct LoaderState {
  int64_t epoch = 0;           // epochs completed before the next batch
  int64_t batch_in_epoch = 0;  // global batches of `epoch` already handed out
  uint64_t seed = 0;

  bool operator==(const LoaderState&) const = default;
};

// {"epoch": E, "batch_in_epoch": B, "seed": S} (seed as an unsigned integer: nlohmann keeps
// all 64 bits).
nlohmann::json LoaderStateToJson(const LoaderState& state);
// Errors (InvalidArgument) name the missing or mistyped field.
Result<LoaderState> LoaderStateFromJson(const nlohmann::json& j);

}  // namespace lockstep::data
