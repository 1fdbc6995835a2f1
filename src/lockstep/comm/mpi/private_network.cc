#include "lockstep/comm/mpi/private_network.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace lockstep::comm {
namespace {

bool WriteFile(const char* path, const char* text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = static_cast<ssize_t>(std::strlen(text));
  const bool ok = ::write(fd, text, static_cast<size_t>(n)) == n;
  ::close(fd);
  return ok;
}

// A new namespace starts with `lo` down: nothing, not even 127.0.0.1, would work.
std::string LoopbackUp() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  struct ifreq ifr {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  std::string why;
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
    why = std::string("reading lo's flags: ") + std::strerror(errno);
  } else {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    if (::ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) why = std::string("bringing lo up: ") + std::strerror(errno);
  }
  ::close(fd);
  return why;
}

}  // namespace

std::string EnterPrivateNetwork() {
  if (::unshare(CLONE_NEWNET) == 0) return LoopbackUp();
  const int as_root = errno;
  // Unprivileged: a user namespace grants the capabilities over a network namespace created
  // with it. The caller keeps its own uid and gid inside (files keep their owners).
  char uid_map[64], gid_map[64];
  std::snprintf(uid_map, sizeof(uid_map), "%u %u 1\n", static_cast<unsigned>(::getuid()),
                static_cast<unsigned>(::getuid()));
  std::snprintf(gid_map, sizeof(gid_map), "%u %u 1\n", static_cast<unsigned>(::getgid()),
                static_cast<unsigned>(::getgid()));
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0)
    return std::string("unshare(CLONE_NEWNET): ") + std::strerror(as_root) +
           "; with a user namespace: " + std::strerror(errno);
  if (!WriteFile("/proc/self/setgroups", "deny") || !WriteFile("/proc/self/uid_map", uid_map) ||
      !WriteFile("/proc/self/gid_map", gid_map))
    return std::string("mapping ids into the user namespace: ") + std::strerror(errno);
  return LoopbackUp();
}

}  // namespace lockstep::comm
