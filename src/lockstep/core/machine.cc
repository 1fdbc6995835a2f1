#include "lockstep/core/machine.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <thread>

namespace lockstep {

std::string ProcessorDescription() {
  std::ifstream in("/proc/cpuinfo");
  std::string model = "unknown processor";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) model = line.substr(colon + 2);
    break;
  }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores";
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "?";
  return name;
}

int64_t ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

int64_t PeakResidentBytes() {
  struct rusage u {};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace lockstep
