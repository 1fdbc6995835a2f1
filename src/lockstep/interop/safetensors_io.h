// The safetensors file format as Hugging Face writes and reads it (docs/interop.md): an
// 8-byte little-endian header length N, N bytes of JSON (padded with spaces to a multiple of
// 8) mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end)} relative to
// the data section, plus "__metadata__" (string values only); then the data, little-endian,
// row-major. Written and read here with nlohmann-json for the header (checkpoint/ has
// lockstep's own variant for checkpoint shards).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lockstep/core/result.h"

namespace lockstep::interop {

enum class StDType { kF32, kBF16 };
Result<StDType> ParseStDType(const std::string& text);  // "f32" | "bf16" (--dtype)
const char* StDTypeName(StDType d);                     // "F32" | "BF16" (safetensors' names)
int64_t StDTypeSize(StDType d);

struct StTensorOut {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // product(shape) floats, converted to the file's dtype
};

// Writes `tensors` in the given order (data offsets ascending), all as `dtype`, with
// `metadata` as "__metadata__". The file appears complete or not at all (temp + rename).
Status WriteSafetensors(const std::string& path, const std::vector<StTensorOut>& tensors, StDType dtype,
                        const std::map<std::string, std::string>& metadata);

// Bytes the data of `tensors` takes as `dtype` (sharding decisions).
int64_t SafetensorsDataBytes(const std::vector<StTensorOut>& tensors, StDType dtype);

struct StTensorIn {
  std::vector<int64_t> shape;
  std::vector<float> values;  // converted to fp32 (F32, BF16 and F16 files)
};

// Reads every tensor of a safetensors file; errors (one line, naming the file) for a bad
// header length, malformed JSON, an unknown dtype, offsets outside the data or disagreeing
// with the shape.
Result<std::map<std::string, StTensorIn>> ReadSafetensors(const std::string& path);

}  // namespace lockstep::interop
