// A safetensors reader written in the tests from the format's definition (8-byte length, JSON
// header, data), independent of interop/safetensors_io: what an export test reads its files
// with, so that a mistake in lockstep's reader and writer cannot cancel out.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::interop {

std::vector<char> ReadAll(const std::string& path);

struct Read {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
// name -> (shape, values) of an F32 file, checking the framing on the way (gtest EXPECTs):
// the data 8-aligned, the tensors tiling it, nothing after the last.
std::map<std::string, Read> ReadSafetensorsIndependently(const std::string& path, nlohmann::json* metadata);

}  // namespace lockstep::interop
