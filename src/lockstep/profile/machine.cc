#include "lockstep/profile/machine.h"

#include <unistd.h>

#include <fstream>
#include <thread>

namespace lockstep::profile {

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

}  // namespace lockstep::profile
