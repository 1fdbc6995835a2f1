// Two "hosts" on one machine for multi-machine tests: two network namespaces joined by a veth
// pair (docs/multi-machine.md, section 6), and the shell helpers the tests drive them with.
// Needs root (ip netns); tests skip with the reason otherwise.
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

namespace lockstep::testing {

// A private /24 for these two test hosts only; it exists only inside the namespaces (which
// have nothing but loopback and the veth), so traffic cannot leave them.
inline constexpr const char* kSubnet = "10.213.7.0/24";
inline constexpr const char* kAddrA = "10.213.7.1";
inline constexpr const char* kAddrB = "10.213.7.2";

struct Shell {
  int code = -1;
  std::string out;  // stdout and stderr together
};

std::string Quote(const std::string& s);
Shell Sh(const std::string& cmd);

// Namespaces left by a test run that was killed before its guard ran: ours are named
// lsmh-<pid>-a|b, and one whose pid no longer exists belongs to nobody.
void RemoveStaleNamespaces();

// "" when this process may create namespaces, else why not (for GTEST_SKIP).
std::string WhyNoNamespaces();

// Two namespaces joined by a veth pair; on destruction every process still inside them is
// killed and both are deleted, whatever state setup or the test reached.
class NetnsPair {
 public:
  NetnsPair();
  ~NetnsPair();
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  // "" on success, else the step that failed and what `ip` said.
  std::string Create();

  const std::string& ns_a() const { return ns_a_; }
  const std::string& ns_b() const { return ns_b_; }
  const std::string& veth_a() const { return veth_a_; }
  const std::string& veth_b() const { return veth_b_; }
  // The name both ends of the veth carry inside their namespaces (what --mpi-if names).
  std::string Common() const { return "lsmh" + std::to_string(getpid()); }

  // "net:[inode]" of a namespace, as /proc/<pid>/ns/net of a process inside it reads.
  static std::string Id(const std::string& ns);
  static long RxBytes(const std::string& ns, const std::string& veth);

 private:
  std::string ns_a_, ns_b_, veth_a_, veth_b_;
};

struct RemovedAtExit {
  std::vector<std::string> dirs;
  ~RemovedAtExit();
};

std::string ReadFirstLine(const std::string& path);

}  // namespace lockstep::testing
