// DType: the element types a checkpoint stores, named as in safetensors.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace lockstep::checkpoint {

enum class DType : uint8_t { kF32, kBF16, kI32, kI64, kU8 };

// The safetensors name: "F32", "BF16", "I32", "I64", "U8".
const char* DTypeName(DType dtype);
// Bytes per element (4, 2, 4, 8, 1).
int64_t DTypeSize(DType dtype);
// Exact, case-sensitive match of a safetensors name; nullopt for anything else.
std::optional<DType> ParseDType(std::string_view name);

}  // namespace lockstep::checkpoint
