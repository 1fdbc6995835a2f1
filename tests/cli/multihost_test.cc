// Across machines (issue 5): two "hosts" on one machine, made of two network namespaces
// joined by a veth pair. mpirun runs in the first, reads a hostfile naming both, and starts
// the second host's daemon through scripts/netns-agent.sh instead of ssh, so the two ranks
// talk MPI over TCP across the veth exactly as two machines would over their network. This
// is the recipe of docs/multi-machine.md. The deterministic weights must equal those of the
// one-process run. Needs root (ip netns); skipped with the reason otherwise.
#include <gtest/gtest.h>
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
namespace {

// A private /24 for these two test hosts only; it exists only inside the namespaces (which
// have nothing but loopback and the veth), so traffic cannot leave them.
constexpr const char* kSubnet = "10.213.7.0/24";
constexpr const char* kAddrA = "10.213.7.1";
constexpr const char* kAddrB = "10.213.7.2";
constexpr int kSteps = 4;

struct Shell {
  int code = -1;
  std::string out;  // stdout and stderr together
};

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

// Namespaces left by a test run that was killed before its guard ran: ours are named
// lsmh-<pid>-a|b, and one whose pid no longer exists belongs to nobody.
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

// Two namespaces joined by a veth pair; on destruction every process still inside them is
// killed and both are deleted, whatever state setup or the test reached.
class NetnsPair {
 public:
  NetnsPair() {
    std::string id = std::to_string(getpid());
    ns_a_ = "lsmh-" + id + "-a";
    ns_b_ = "lsmh-" + id + "-b";
    veth_a_ = "lsmh" + id + "a";  // interface names are limited to 15 characters
    veth_b_ = "lsmh" + id + "b";
  }
  ~NetnsPair() {
    for (const std::string& ns : {ns_a_, ns_b_}) {
      Sh("ip netns pids " + ns + " 2>/dev/null | xargs -r kill -9");
      Sh("ip netns del " + ns + " 2>/dev/null");
    }
    Sh("ip link del " + veth_a_ + " 2>/dev/null");  // only if it never left the root namespace
  }
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  // "" on success, else the step that failed and what `ip` said.
  std::string Create() {
    const std::vector<std::string> steps = {
        "ip netns add " + ns_a_,
        "ip netns add " + ns_b_,
        "ip link add " + veth_a_ + " type veth peer name " + veth_b_,
        "ip link set " + veth_a_ + " netns " + ns_a_,
        "ip link set " + veth_b_ + " netns " + ns_b_,
        "ip -n " + ns_a_ + " addr add " + kAddrA + "/24 dev " + veth_a_,
        "ip -n " + ns_b_ + " addr add " + kAddrB + "/24 dev " + veth_b_,
        "ip -n " + ns_a_ + " link set lo up",
        "ip -n " + ns_b_ + " link set lo up",
        "ip -n " + ns_a_ + " link set " + veth_a_ + " up",
        "ip -n " + ns_b_ + " link set " + veth_b_ + " up",
    };
    for (const std::string& s : steps) {
      Shell r = Sh(s);
      if (r.code != 0) return "`" + s + "` failed: " + r.out;
    }
    return "";
  }

  const std::string& ns_a() const { return ns_a_; }
  const std::string& ns_b() const { return ns_b_; }
  const std::string& veth_a() const { return veth_a_; }
  const std::string& veth_b() const { return veth_b_; }

  // "net:[inode]" of a namespace, as /proc/<pid>/ns/net of a process inside it reads.
  static std::string Id(const std::string& ns) {
    Shell r = Sh("ip netns exec " + ns + " readlink /proc/self/ns/net");
    return r.code == 0 ? r.out.substr(0, r.out.find('\n')) : "";
  }
  static long RxBytes(const std::string& ns, const std::string& veth) {
    Shell r = Sh("ip netns exec " + ns + " cat /sys/class/net/" + veth + "/statistics/rx_bytes");
    return r.code == 0 ? std::atol(r.out.c_str()) : -1;
  }

 private:
  std::string ns_a_, ns_b_, veth_a_, veth_b_;
};

struct RemovedAtExit {
  std::vector<std::string> dirs;
  ~RemovedAtExit() {
    for (const std::string& d : dirs) Sh("rm -rf " + Quote(d));
  }
};

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(MultiHost, TwoNamespacesOverTcpMatchOneProcess) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to create network namespaces (ip netns); running as uid " << geteuid();
  if (Sh("command -v ip").code != 0) GTEST_SKIP() << "`ip` (iproute2) is not installed";
  RemoveStaleNamespaces();
  NetnsPair net;
  std::string why = net.Create();
  if (!why.empty()) GTEST_SKIP() << "cannot create network namespaces here: " << why;

  RemovedAtExit cleanup;
  std::string work = MakeTempDir("mh"), out = MakeTempDir("mh-run"), ref = MakeTempDir("mh-ref");
  cleanup.dirs = {work, out, ref};
  const std::string source = LOCKSTEP_SOURCE_DIR;
  {
    // The hosts are named by their addresses; rank 0 goes to the first line, mpirun's own host.
    std::ofstream hosts(work + "/hostfile");
    hosts << kAddrA << " slots=1\n" << kAddrB << " slots=1\n";
    std::ofstream map(work + "/netns.map");
    map << kAddrA << " " << net.ns_a() << "\n" << kAddrB << " " << net.ns_b() << "\n";
  }

  // Each rank records the network namespace it runs in, then becomes `lockstep train`.
  std::string train = Quote(std::string(LOCKSTEP_BINARY_DIR) + "/lockstep") + " train";
  for (const std::string& a : TinyGptFlags()) {
    train += ' ';  // (not `" " + Quote(a)`: GCC 12 gives a false -Wrestrict warning there)
    train += Quote(a);
  }
  train += " --steps " + std::to_string(kSteps) + " --deterministic --backend mpi --out " + Quote(out);
  std::string rank_cmd = "readlink /proc/self/ns/net >" + Quote(work) + "/ns.$OMPI_COMM_WORLD_RANK && exec " + train;

  std::string mpirun = "cd " + Quote(source) + " && timeout -k 5 45 ip netns exec " + net.ns_a() +
                       " env LOCKSTEP_NETNS_MAP=" + Quote(work + "/netns.map") +
                       " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
                       " mpirun --allow-run-as-root -np 2 --hostfile " +
                       Quote(work + "/hostfile") + " --mca plm_rsh_agent " + Quote(source + "/scripts/netns-agent.sh") +
                       " --mca plm_rsh_no_tree_spawn 1 --mca orte_keep_fqdn_hostnames 1"
                       " --mca btl self,tcp --mca btl_tcp_if_include " +
                       kSubnet + " --mca oob_tcp_if_include " + kSubnet + " --bind-to none --wdir " + Quote(source) +
                       " sh -c " + Quote(rank_cmd);
  Shell run = Sh(mpirun);
  ASSERT_EQ(run.code, 0) << (run.code == 124 ? "mpirun timed out after 45 s\n" : "") << "command: " << mpirun << "\n"
                         << run.out;

  // One rank ran in each namespace...
  EXPECT_EQ(ReadFirstLine(work + "/ns.0"), NetnsPair::Id(net.ns_a())) << run.out;
  EXPECT_EQ(ReadFirstLine(work + "/ns.1"), NetnsPair::Id(net.ns_b())) << run.out;
  // ...and their gradients crossed the veth: in every step each rank needs the other's
  // contribution to every fp32 gradient element, so each side receives at least
  // steps x parameters x 4 bytes (the measured traffic is ~1.0-1.3 times that).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m, std::regex(R"(\((\d+) parameters\))"))) << run.out;
  long floor = static_cast<long>(kSteps) * std::stol(m[1]) * 4;
  EXPECT_GE(NetnsPair::RxBytes(net.ns_a(), net.veth_a()), floor);
  EXPECT_GE(NetnsPair::RxBytes(net.ns_b(), net.veth_b()), floor);

  std::vector<std::string> one = TinyGptFlags();
  one.insert(one.begin(), "train");
  for (const std::string& a : {std::string("--steps"), std::to_string(kSteps), std::string("--deterministic"),
                               std::string("--nproc"), std::string("1"), std::string("--out"), ref})
    one.push_back(a);
  CommandResult single = RunLockstep(one);
  ASSERT_EQ(single.exit_code, 0) << single.err;
  std::string expected = DoneHash(ref);
  ASSERT_EQ(expected.size(), 16u);
  EXPECT_EQ(DoneHash(out), expected) << run.out;
}

}  // namespace
}  // namespace lockstep::testing
