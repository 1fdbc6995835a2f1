// The run's weights fingerprint (DESIGN.md, metrics.jsonl "done" line): xxh64 over every
// parameter's full fp32 values in canonical order — parameters sorted by name, each tensor
// in row-major order, little-endian — so it is the same whatever layout produced them.
#pragma once

#include <string>

#include "lockstep/nn/parameter_store.h"

namespace lockstep::runtime {

std::string WeightsXxh64(const nn::ParameterStore& params);

}  // namespace lockstep::runtime
