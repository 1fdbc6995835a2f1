// DType: the element types lockstep moves, stores and computes with, one enum for every layer
// (tensor/ computes in f32, bf16 and i32; comm/ also moves i64 and raw bytes as u8; checkpoint/
// stores all five, under safetensors' names). Sizes and names are defined once here.
#pragma once

#include <cstdint>

namespace lockstep {

enum class DType : uint8_t { kF32, kBF16, kI32, kI64, kU8 };

// Bytes per element: 4, 2, 4, 8, 1.
int64_t DTypeSize(DType dtype);
// "f32", "bf16", "i32", "i64", "u8" (messages; checkpoint/dtype.h has the stored names).
const char* DTypeName(DType dtype);

}  // namespace lockstep
