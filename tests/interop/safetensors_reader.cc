#include "interop/safetensors_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace lockstep::interop {

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::map<std::string, Read> ReadSafetensorsIndependently(const std::string& path, nlohmann::json* metadata) {
  const std::vector<char> bytes = ReadAll(path);
  EXPECT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "data must start 8-aligned";
  const nlohmann::json h = nlohmann::json::parse(std::string(bytes.data() + 8, n));
  *metadata = h.at("__metadata__");
  std::map<std::string, Read> out;
  int64_t expect_begin = 0;
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [name, e] : h.items())
    if (name != "__metadata__") order.push_back({e.at("data_offsets")[0].get<int64_t>(), name});
  std::sort(order.begin(), order.end());
  for (const auto& [begin, name] : order) {
    const nlohmann::json& e = h.at(name);
    EXPECT_EQ(e.at("dtype"), "F32") << name;
    Read r;
    r.shape = e.at("shape").get<std::vector<int64_t>>();
    int64_t count = 1;
    for (int64_t d : r.shape) count *= d;
    const int64_t end = e.at("data_offsets")[1].get<int64_t>();
    EXPECT_EQ(begin, expect_begin) << name << ": tensors must tile the data section";
    EXPECT_EQ(end - begin, count * 4) << name;
    expect_begin = end;
    r.values.resize(static_cast<size_t>(count));
    std::memcpy(r.values.data(), bytes.data() + 8 + n + begin, static_cast<size_t>(count) * 4);
    out[name] = std::move(r);
  }
  EXPECT_EQ(static_cast<size_t>(8 + n + expect_begin), bytes.size()) << "no bytes after the last tensor";
  return out;
}

}  // namespace lockstep::interop
