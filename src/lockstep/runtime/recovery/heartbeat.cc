#include "lockstep/runtime/recovery/heartbeat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace lockstep::runtime {

Heartbeat::Heartbeat(int rank) {
  if (const char* dir = std::getenv(kHeartbeatDirEnv); dir != nullptr && *dir != '\0')
    path_ = std::string(dir) + "/rank-" + std::to_string(rank);
}

void Heartbeat::Beat() const {
  if (path_.empty()) return;
  // utimensat(nullptr) sets the mtime to now; the first beat creates the file.
  if (::utimensat(AT_FDCWD, path_.c_str(), nullptr, 0) == 0) return;
  int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
}

}  // namespace lockstep::runtime
