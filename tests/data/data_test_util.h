// Helpers for data/ tests: file writers (the temporary directory is tests/temp_dir.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace lockstep::data::testing {

using lockstep::testing::TempDir;

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes);
void WriteFile(const std::string& path, const std::string& text);
void WriteGzip(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> ReadFileBytes(const std::string& path);

// An IDX file's bytes: big-endian magic and dimensions, then `payload`.
std::vector<uint8_t> IdxBytes(uint32_t magic, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& payload);

}  // namespace lockstep::data::testing
