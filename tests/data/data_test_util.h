// Helpers for data/ tests: a self-deleting temporary directory and file writers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::data::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes);
void WriteFile(const std::string& path, const std::string& text);
void WriteGzip(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> ReadFileBytes(const std::string& path);

// An IDX file's bytes: big-endian magic and dimensions, then `payload`.
std::vector<uint8_t> IdxBytes(uint32_t magic, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& payload);

}  // namespace lockstep::data::testing
