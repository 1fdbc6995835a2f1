// launch.h: detecting mpirun, the mpirun command line, and RelaunchUnderMpirun's exit status
// and signal forwarding.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>

#include "comm/mpi_test_util.h"
#include "lockstep/core/clock.h"

namespace lockstep::comm {
namespace {

std::string SelfPath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(MpiLaunch, CommandLine) {
  if (InsideMpirun()) return;
  char a0[] = "some/relative/name", a1[] = "bench-comm", a2[] = "--nproc";
  char a3[] = "3";
  char* argv[] = {a0, a1, a2, a3, nullptr};
  std::vector<std::string> cmd = MpirunCommandLine(MpirunSetup{}, 3, 4, argv, {"--extra"});
  ASSERT_GE(cmd.size(), 8u);
  EXPECT_EQ(cmd[0], "mpirun");
  EXPECT_EQ(cmd[1], "-np");
  EXPECT_EQ(cmd[2], "3");
  EXPECT_TRUE(Has(cmd, "--oversubscribe"));
  EXPECT_TRUE(Has(cmd, "--bind-to"));
  EXPECT_EQ(Has(cmd, "--allow-run-as-root"), geteuid() == 0);
  // The executable is this very binary, then the original arguments, then the extra ones.
  const size_t n = cmd.size();
  EXPECT_EQ(cmd[n - 5], SelfPath());
  EXPECT_EQ(cmd[n - 4], "bench-comm");
  EXPECT_EQ(cmd[n - 3], "--nproc");
  EXPECT_EQ(cmd[n - 2], "3");
  EXPECT_EQ(cmd[n - 1], "--extra");
}

// One machine: shared memory only (the ranks listen on nothing); hosts named: TCP too, with
// both of OpenMPI's channels pinned to --mpi-if's interface, which is then required.
TEST(MpiLaunch, NetworkPinsOnlyWithHosts) {
  if (InsideMpirun()) return;
  char a0[] = "lockstep";
  char* argv[] = {a0, nullptr};
  auto after = [](const std::vector<std::string>& cmd, const std::string& word) {
    auto it = std::find(cmd.begin(), cmd.end(), word);
    return it == cmd.end() || it + 1 == cmd.end() ? std::string() : *(it + 1);
  };
  MpirunSetup one_machine;
  ASSERT_TRUE(CheckMpiNetwork(one_machine).ok());
  std::vector<std::string> one = MpirunCommandLine(one_machine, 2, 1, argv, {});
  if (std::getenv("OMPI_MCA_btl") == nullptr) {
    EXPECT_EQ(after(one, "btl"), "self,vader");
  }
  EXPECT_FALSE(Has(one, "oob_tcp_if_include"));
  EXPECT_FALSE(one_machine.NamesHosts());

  MpirunSetup hosts_setup{{"--host", "a,b"}, ""};
  EXPECT_TRUE(hosts_setup.NamesHosts());
  EXPECT_FALSE(CheckMpiNetwork(hosts_setup).ok());  // hosts need an interface
  hosts_setup.interface = "lo";
  ASSERT_TRUE(CheckMpiNetwork(hosts_setup).ok());
  std::vector<std::string> hosts = MpirunCommandLine(hosts_setup, 2, 1, argv, {});
  if (std::getenv("OMPI_MCA_btl") == nullptr) {
    EXPECT_EQ(after(hosts, "btl"), "self,vader,tcp");
  }
  EXPECT_EQ(after(hosts, "oob_tcp_if_include"), "lo");
  EXPECT_EQ(after(hosts, "btl_tcp_if_include"), "lo");
  EXPECT_TRUE(Has(hosts, "--host"));
  // A channel the user's arguments pin themselves is not pinned twice (mpirun refuses that).
  MpirunSetup pinned{{"--host", "a,b", "--mca", "oob_tcp_if_include", "eth9"}, "lo"};
  std::vector<std::string> own = MpirunCommandLine(pinned, 2, 1, argv, {});
  EXPECT_EQ(std::count(own.begin(), own.end(), "oob_tcp_if_include"), 1);
  EXPECT_EQ(after(own, "oob_tcp_if_include"), "eth9");
  EXPECT_EQ(after(own, "btl_tcp_if_include"), "lo");
  MpirunSetup iface_only{{}, "lo"};
  EXPECT_FALSE(CheckMpiNetwork(iface_only).ok());  // no hosts: loopback only
}

// LOCKSTEP_MPIRUN_ARGS is read once, split on white space, into the setup every launch takes.
TEST(MpiLaunch, SetupFromTheEnvironment) {
  const char* was = std::getenv("LOCKSTEP_MPIRUN_ARGS");
  const std::string saved = was == nullptr ? "" : was;
  setenv("LOCKSTEP_MPIRUN_ARGS", "  --hostfile h   --mca plm_rsh_agent /x/agent.sh ", 1);
  const MpirunSetup s = MpirunSetup::FromEnvironment();
  EXPECT_EQ(s.args, (std::vector<std::string>{"--hostfile", "h", "--mca", "plm_rsh_agent", "/x/agent.sh"}));
  EXPECT_TRUE(s.NamesHosts());
  EXPECT_EQ(s.McaParameter("plm_rsh_agent"), "/x/agent.sh");
  EXPECT_EQ(s.interface, "");
  unsetenv("LOCKSTEP_MPIRUN_ARGS");
  EXPECT_TRUE(MpirunSetup::FromEnvironment().args.empty());
  if (was != nullptr) setenv("LOCKSTEP_MPIRUN_ARGS", saved.c_str(), 1);
}

// InsideMpirun reads OpenMPI's OMPI_COMM_WORLD_SIZE, which mpirun sets in every rank: set,
// unset and empty here, then restored, whatever started this test.
TEST(MpiLaunch, InsideMpirunFollowsOpenMpisEnvironment) {
  const char* was = std::getenv("OMPI_COMM_WORLD_SIZE");
  const std::string saved = was == nullptr ? "" : was;
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  EXPECT_TRUE(InsideMpirun());
  setenv("OMPI_COMM_WORLD_SIZE", "", 1);
  EXPECT_FALSE(InsideMpirun());
  unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_FALSE(InsideMpirun());
  if (was != nullptr) setenv("OMPI_COMM_WORLD_SIZE", saved.c_str(), 1);
}

// srun --mpi=pmix starts the ranks itself: a step of several tasks with a PMI server is an MPI
// job of that many processes; a single task, or tasks without PMI, are not.
TEST(MpiLaunch, InsideAnSrunStepWithPmix) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("SLURM_STEP_ID") != nullptr) return;
  EXPECT_EQ(MpiJobProcesses(), 1);
  setenv("SLURM_STEP_ID", "0", 1);
  setenv("SLURM_STEP_NUM_TASKS", "4", 1);
  EXPECT_FALSE(InsideMpirun());  // no PMI: the tasks cannot find each other
  setenv("PMIX_RANK", "2", 1);
  EXPECT_TRUE(InsideMpirun());
  EXPECT_EQ(MpiJobProcesses(), 4);
  setenv("SLURM_STEP_NUM_TASKS", "1", 1);
  EXPECT_FALSE(InsideMpirun());
  EXPECT_EQ(MpiJobProcesses(), 1);
  for (const char* v : {"SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS", "PMIX_RANK"}) unsetenv(v);
}

// --mpi-if derived from the hosts: the interface whose subnet holds their address.
TEST(MpiLaunch, InterfaceReachingTheHosts) {
  Result<std::string> loopback = InterfaceReaching({"127.0.0.1", "localhost"});
  ASSERT_FALSE(loopback.ok());
  EXPECT_NE(loopback.status().message().find("every host resolves to loopback"), std::string::npos);
  Result<std::string> unknown = InterfaceReaching({"no-such-host.invalid"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'no-such-host.invalid' does not resolve here"), std::string::npos);
  // Off every subnet of this machine (TEST-NET-3 is never assigned).
  Result<std::string> away = InterfaceReaching({"203.0.113.9"});
  ASSERT_FALSE(away.ok());
  EXPECT_NE(away.status().message().find("is on no subnet"), std::string::npos);
  // A neighbour on the subnet of this machine's first IPv4 interface other than loopback.
  struct ifaddrs* all = nullptr;
  ASSERT_EQ(getifaddrs(&all), 0);
  std::string name, neighbour;
  for (struct ifaddrs* i = all; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_netmask == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) != 0 || (i->ifa_flags & IFF_UP) == 0) continue;
    const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    const uint32_t mask = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr);
    if (mask == 0xffffffffu) continue;
    in_addr other{htonl((ip & mask) | ((ip + 1) & ~mask))};
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &other, text, sizeof text);
    name = i->ifa_name;
    neighbour = text;
  }
  freeifaddrs(all);
  if (name.empty()) GTEST_SKIP() << "no IPv4 interface but loopback";
  Result<std::string> found = InterfaceReaching({"localhost", neighbour});
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(*found, name) << neighbour;
}

// Under mpirun every rank sees itself inside it (the relaunch would recurse otherwise), and a
// rank's exit status comes back through mpirun.
TEST(MpiLaunch, InsideMpirunAndExitStatus) {
  if (!InsideMpirun()) {
    char a0[] = "test";
    char* argv[] = {a0, nullptr};
    // Rank 2 exits with 5: mpirun, and so RelaunchUnderMpirun, report it.
    int rc = RelaunchUnderMpirun(MpirunSetup{}, 3, 1, argv, {"--gtest_filter=MpiLaunch.InsideMpirunAndExitStatus"});
    EXPECT_EQ(rc, 5);
    return;
  }
  if (std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")) == 2) _exit(5);
}

TEST(MpiLaunch, ForwardsSigterm) {
  if (!InsideMpirun()) {
    char a0[] = "test";
    char* argv[] = {a0, nullptr};
    std::thread killer([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      kill(getpid(), SIGTERM);  // handled by RelaunchUnderMpirun: forwarded, not fatal
    });
    Stopwatch sw;
    int rc = RelaunchUnderMpirun(MpirunSetup{}, 2, 1, argv, {"--gtest_filter=MpiLaunch.ForwardsSigterm"});
    killer.join();
    EXPECT_NE(rc, 0);
    EXPECT_LT(sw.ElapsedSeconds(), 8.0);  // the ranks would sleep 60 s
    return;
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

}  // namespace
}  // namespace lockstep::comm
