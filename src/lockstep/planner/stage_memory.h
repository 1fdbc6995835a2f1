// One pipeline stage's memory for the step model (step_model.h): the model states (StatesOf, the
// ZeRO accounting both paths share), the ZeRO units in flight, the activations. Internal to the
// step model, with the flat ranges of a stage's units that its communication model also walks.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/planner/step_model.h"

namespace lockstep::planner::step {

inline constexpr int64_t kF32 = 4;

// Each parameter's first flat element.
std::vector<int64_t> Offsets(const std::vector<int64_t>& numels);

// A ZeRO unit as a range of the stage's flat elements.
struct UnitRange {
  int64_t begin = 0, numel = 0;
};
std::vector<UnitRange> UnitRanges(const StageCost& s);

// Rank 0's bytes on `stage` (tp rank 0, dp rank 0: the largest ZeRO shard).
StageMemory MemoryOf(const LayoutInput& in, const StageCost& s, int stage);

}  // namespace lockstep::planner::step
