// What `lockstep plan` keeps between plans in <out>/plan-profile.json: the compute profiles, the
// collectives' curves and the ZeRO probe's figures, under a key naming what they were measured
// for (ProfileKey); a file with another key, or none, starts an empty cache.
//   {"key",
//    "compute": {"w<workers>-t<threads>": ComputeProfile::ToJson()},
//    "comm": {"<backend>-<N>": CommTable::ToJson()},
//    "zero": {"<backend>-<N>": {"rows", "plain_rows", "plain_ms", "zero2", "zero3", "zero2_overlap",
//             "zero3_overlap"}}}
// (the last: MeasureZeroOverRanks's figures over the plan's N workers).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/core/status.h"
#include "lockstep/planner/candidates.h"

namespace lockstep::planner {

struct ProfileCache {
  std::string path;
  nlohmann::json json;
  bool changed = false;  // something was measured into it: SaveCache writes it back
};

// What a cached profile was measured for: the model's shape, the optimizer, this build and
// machine, and the profile's format. Anything else (batch, layouts) only changes which shapes
// are needed.
std::string ProfileKey(const PlanSetup& s);

// The cache at `path` when it was made for `key`; an empty one when it was not, or `fresh`.
ProfileCache OpenCache(const std::string& path, const std::string& key, bool fresh);

// Writes the cache beside its path and renames it over (IoError naming the file).
Status SaveCache(const ProfileCache& cache);

// The cache's compute slot of a profile: "w<workers>-t<threads>".
std::string ComputeSlot(int workers, int threads);

}  // namespace lockstep::planner
