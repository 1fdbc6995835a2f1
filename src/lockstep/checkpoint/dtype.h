// The element types a checkpoint stores (core/dtype.h), named as in safetensors.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "lockstep/core/dtype.h"

namespace lockstep::checkpoint {

using lockstep::DType;
using lockstep::DTypeSize;

// The safetensors name: "F32", "BF16", "I32", "I64", "U8".
const char* StoredDTypeName(DType dtype);
// Exact, case-sensitive match of a safetensors name; nullopt for anything else.
std::optional<DType> ParseStoredDType(std::string_view name);

}  // namespace lockstep::checkpoint
