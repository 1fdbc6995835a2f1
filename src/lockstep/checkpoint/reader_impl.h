// Checkpoint's private state, shared by reader.cc (Open) and reader_data.cc (Read, Verify).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/checkpoint/env.h"
#include "lockstep/checkpoint/manifest.h"
#include "lockstep/checkpoint/reader.h"

namespace lockstep::checkpoint {

struct Checkpoint::Impl {
  std::string dir;
  Env* env = nullptr;
  Manifest manifest;
  std::map<std::string, size_t, std::less<>> by_name;              // tensor name -> index
  std::map<std::string, std::unique_ptr<RandomAccessFile>> files;  // file name -> open file
  mutable std::mutex mu;
  mutable std::vector<std::vector<char>> verified;  // [tensor][shard]: checksum already matched

  std::string Path(const std::string& file) const { return JoinPath(dir, file); }
};

}  // namespace lockstep::checkpoint
