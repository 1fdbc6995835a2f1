// Across machines: two "hosts" on one machine, made of two network namespaces
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
#include "netns_util.h"
#include "test_env.h"

namespace lockstep::testing {
namespace {

constexpr int kSteps = 4;

// `backend`: the train flags that pick the backend and the workers; `ranks`: MPI processes.
void TrainOnTwoNamespaces(const std::string& backend, int ranks) {
  if (std::string why = WhyNoNamespaces(); !why.empty()) LOCKSTEP_SKIP_OUTSIDE_CI(why);
  RemoveStaleNamespaces();
  NetnsPair net;
  std::string why = net.Create();
  if (!why.empty()) LOCKSTEP_SKIP_OUTSIDE_CI("cannot create network namespaces here: " << why);

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
  train += " --steps " + std::to_string(kSteps) + " --deterministic " + backend + " --out " + Quote(out);
  std::string rank_cmd = "readlink /proc/self/ns/net >" + Quote(work) + "/ns.$OMPI_COMM_WORLD_RANK && exec " + train;

  std::string mpirun = "cd " + Quote(source) + " && timeout -k 5 45 ip netns exec " + net.ns_a() +
                       " env LOCKSTEP_NETNS_MAP=" + Quote(work + "/netns.map") +
                       " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
                       " mpirun --allow-run-as-root -np " + std::to_string(ranks) + " --hostfile " +
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
  // What ran: a hash alone would not tell a silently ignored backend flag.
  std::vector<nlohmann::json> starts = Events(out, "start");
  ASSERT_FALSE(starts.empty());
  EXPECT_EQ(starts[0]["backend"], backend.find("hier") != std::string::npos ? "hier" : "mpi");
  EXPECT_EQ(starts[0]["world"], backend.find("--nproc 4") != std::string::npos ? 4 : 2);
}

TEST(MultiHost, TwoNamespacesOverTcpMatchOneProcess) { TrainOnTwoNamespaces("--backend mpi", 2); }

// The hierarchical backend: one process a host, two worker threads in each; the gradients
// are reduced inside each host, then across the veth by both workers of a host at once.
TEST(MultiHost, TwoHostProcessesOfTwoWorkersMatchOneProcess) {
  TrainOnTwoNamespaces("--backend hier --nproc 4 --workers-per-host 2", 2);
}

}  // namespace
}  // namespace lockstep::testing
