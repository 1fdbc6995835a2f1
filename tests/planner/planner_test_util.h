// Synthetic inputs for the planner's tests: collective curves linear in the message size, and
// a stage of three parameters computing given forward and backward times.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/planner/comm_curve.h"
#include "lockstep/planner/step_model.h"

namespace lockstep::planner {

// latency_ms + ms_per_mb x MB at sizes 1 KiB .. 64 MiB.
CommCurve Linear(double latency_ms, double ms_per_mb);
// Allreduce, reduce-scatter and all-gather curves for `group`, and a send between two.
CommTable Table(int group);
// A stage of three parameters (one ZeRO unit each) computing fwd/bwd ms per micro-batch.
StageCost Stage(double fwd, double bwd, std::vector<int64_t> numels = {1000, 700, 301});

}  // namespace lockstep::planner
