#include "netns_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "cli_test_util.h"

namespace lockstep::testing {

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Shell Sh(const std::string& cmd) {
  std::string dir = MakeTempDir("mh-sh");
  int status = std::system(("(" + cmd + ") >" + dir + "/out 2>&1 </dev/null").c_str());
  Shell r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(dir + "/out");
  std::stringstream ss;
  ss << in.rdbuf();
  r.out = ss.str();
  std::system(("rm -rf " + Quote(dir)).c_str());
  return r;
}

void RemoveStaleNamespaces() {
  std::istringstream list(Sh("ip netns list").out);
  static const std::regex ours(R"(^lsmh-(\d+)-[ab]$)");
  for (std::string line; std::getline(list, line);) {
    std::string name = line.substr(0, line.find(' '));
    std::smatch m;
    if (!std::regex_match(name, m, ours)) continue;
    pid_t pid = static_cast<pid_t>(std::stol(m[1]));
    if (kill(pid, 0) != 0 && errno == ESRCH) Sh("ip netns del " + name);
  }
}

std::string WhyNoNamespaces() {
  if (geteuid() != 0)
    return "needs root to create network namespaces (ip netns); running as uid " + std::to_string(geteuid());
  if (Sh("command -v ip").code != 0) return "`ip` (iproute2) is not installed";
  return "";
}

NetnsPair::NetnsPair() {
  std::string id = std::to_string(getpid());
  ns_a_ = "lsmh-" + id + "-a";
  ns_b_ = "lsmh-" + id + "-b";
  veth_a_ = "lsmh" + id + "a";  // interface names are limited to 15 characters
  veth_b_ = "lsmh" + id + "b";
}

NetnsPair::~NetnsPair() {
  for (const std::string& ns : {ns_a_, ns_b_}) {
    Sh("ip netns pids " + ns + " 2>/dev/null | xargs -r kill -9");
    Sh("ip netns del " + ns + " 2>/dev/null");
  }
  Sh("ip link del " + veth_a_ + " 2>/dev/null");  // only if it never left the root namespace
}

std::string NetnsPair::Create() {
  const std::vector<std::string> steps = {
      "ip netns add " + ns_a_,
      "ip netns add " + ns_b_,
      "ip link add " + veth_a_ + " type veth peer name " + veth_b_,
      "ip link set " + veth_a_ + " netns " + ns_a_,
      "ip link set " + veth_b_ + " netns " + ns_b_,
      // The same interface name on both "hosts", as real machines usually have (eth0): the one
      // name --mpi-if takes must exist on every host.
      "ip -n " + ns_a_ + " link set " + veth_a_ + " name " + Common(),
      "ip -n " + ns_b_ + " link set " + veth_b_ + " name " + Common(),
      "ip -n " + ns_a_ + " addr add " + kAddrA + "/24 dev " + Common(),
      "ip -n " + ns_b_ + " addr add " + kAddrB + "/24 dev " + Common(),
      "ip -n " + ns_a_ + " link set lo up",
      "ip -n " + ns_b_ + " link set lo up",
      "ip -n " + ns_a_ + " link set " + Common() + " up",
      "ip -n " + ns_b_ + " link set " + Common() + " up",
  };
  for (const std::string& s : steps) {
    Shell r = Sh(s);
    if (r.code != 0) return "`" + s + "` failed: " + r.out;
  }
  veth_a_ = veth_b_ = Common();
  return "";
}

std::string NetnsPair::Id(const std::string& ns) {
  Shell r = Sh("ip netns exec " + ns + " readlink /proc/self/ns/net");
  return r.code == 0 ? r.out.substr(0, r.out.find('\n')) : "";
}

long NetnsPair::RxBytes(const std::string& ns, const std::string& veth) {
  Shell r = Sh("ip netns exec " + ns + " cat /sys/class/net/" + veth + "/statistics/rx_bytes");
  return r.code == 0 ? std::atol(r.out.c_str()) : -1;
}

RemovedAtExit::~RemovedAtExit() {
  for (const std::string& d : dirs) Sh("rm -rf " + Quote(d));
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace lockstep::testing
