#include "lockstep/runtime/metrics_log.h"

#include <cerrno>
#include <cstring>

namespace lockstep::runtime {

Result<MetricsLog> MetricsLog::Open(const std::string& path, bool append) {
  std::FILE* f = std::fopen(path.c_str(), append ? "a" : "w");
  if (f == nullptr) return Status::IoError("cannot open " + path + ": " + std::strerror(errno));
  return MetricsLog(f, path);
}

MetricsLog::MetricsLog(MetricsLog&& o) noexcept : file_(o.file_), path_(std::move(o.path_)) { o.file_ = nullptr; }
MetricsLog& MetricsLog::operator=(MetricsLog&& o) noexcept {
  if (this != &o) {
    if (file_) std::fclose(file_);
    file_ = o.file_;
    path_ = std::move(o.path_);
    o.file_ = nullptr;
  }
  return *this;
}
MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

Status MetricsLog::Write(const nlohmann::json& row) {
  std::string line = row.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    return Status::IoError("cannot write " + path_ + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace lockstep::runtime
