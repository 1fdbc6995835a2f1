#include "lockstep/runtime/metrics/metrics_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace lockstep::runtime {

Result<MetricsLog> MetricsLog::Open(const std::string& path, bool append) {
  // 0644, not fopen's 0666: never writable by others whatever the umask (docs/security.md).
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  std::FILE* f = fd < 0 ? nullptr : ::fdopen(fd, append ? "a" : "w");
  if (f == nullptr) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return Status::IoError("cannot open " + path + ": " + std::strerror(err));
  }
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

Status TrimMetricsAfter(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return Status::Ok();
  std::string kept, line;
  while (std::getline(in, line)) {
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object()) continue;
    auto it = row.find("step");
    if (it != row.end() && it->is_number_integer() && it->get<int64_t>() > step) continue;
    kept += line + "\n";
  }
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError("cannot write " + tmp + ": " + std::strerror(errno));
  bool ok = ::write(fd, kept.data(), kept.size()) == static_cast<ssize_t>(kept.size()) && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::IoError("cannot rewrite " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace lockstep::runtime
