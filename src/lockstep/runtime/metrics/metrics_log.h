// MetricsLog: the run's metrics.jsonl, one JSON object per line, flushed after each line so
// a crash loses at most the line being written. Written by rank 0 only.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/core/result.h"

namespace lockstep::runtime {

class MetricsLog {
 public:
  // append=false truncates (fresh run); append=true continues a resumed run's file.
  static Result<MetricsLog> Open(const std::string& path, bool append);
  MetricsLog(MetricsLog&& other) noexcept;
  MetricsLog& operator=(MetricsLog&& other) noexcept;
  ~MetricsLog();

  Status Write(const nlohmann::json& row);

 private:
  explicit MetricsLog(std::FILE* f, std::string path) : file_(f), path_(std::move(path)) {}
  std::FILE* file_ = nullptr;
  std::string path_;
};

// Rewrites `path` (atomically: temporary file, fsync, rename) keeping only the rows whose
// "step" is at most `step` and rows without a step; unparsable lines (a row torn by a crash)
// are dropped. A missing file is fine (nothing to trim).
Status TrimMetricsAfter(const std::string& path, int64_t step);

}  // namespace lockstep::runtime
