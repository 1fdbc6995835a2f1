// ByteCorpus: the byte-level text corpus of gpt-tiny (DESIGN.md reference workloads).
//
// Selection (same as ../shared/peers/torch_gpt.py, so both train on identical bytes): every
// entry of the directory whose name has no '.', is not a symbolic link and is a regular file
// (the fortunes package ships "x", "x.dat" index files and "x.u8" symlinks to "x"), sorted by
// name in byte order, concatenated. The first floor(0.9 * total) bytes are the training
// split, the rest validation (Python's int(len(data) * 0.9), computed in double the same way).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/core/result.h"

namespace lockstep::data {

inline constexpr const char* kDefaultCorpusDir = "/usr/share/games/fortunes";

struct CorpusFile {
  std::string name;  // file name inside the directory
  int64_t size = 0;  // bytes
};

class ByteCorpus {
 public:
  // Loads `dir`. `context` is the model's context length T: training windows need T + 1
  // bytes and the shuffled stride grid needs the training split to hold at least 2*T bytes,
  // validation at least T + 1, else InvalidArgument. Missing directory or no matching files:
  // NotFound. Every message is one line naming the path.
  static Result<ByteCorpus> Load(const std::string& dir, int64_t context);

  // Which entries of `dir` Load would read, in order (also the list a user sees in errors).
  static Result<std::vector<CorpusFile>> SelectFiles(const std::string& dir);

  // For tests and tools: a corpus from bytes already in memory.
  static ByteCorpus FromBytes(std::vector<uint8_t> bytes, std::string name);

  std::span<const uint8_t> bytes() const { return bytes_; }
  std::span<const uint8_t> train() const { return std::span<const uint8_t>(bytes_).first(split_); }
  std::span<const uint8_t> val() const { return std::span<const uint8_t>(bytes_).subspan(split_); }
  int64_t split() const { return static_cast<int64_t>(split_); }
  const std::vector<CorpusFile>& files() const { return files_; }
  const std::string& dir() const { return dir_; }

  // Index of the train/val boundary for a corpus of `total` bytes: floor(0.9 * total).
  static int64_t SplitPoint(int64_t total);

 private:
  std::vector<uint8_t> bytes_;
  size_t split_ = 0;
  std::vector<CorpusFile> files_;
  std::string dir_;
};

// Checks that a corpus can feed windows of `context` bytes (see Load).
Status CheckCorpusFitsContext(const ByteCorpus& corpus, int64_t context);

}  // namespace lockstep::data
