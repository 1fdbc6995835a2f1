// Elastic recovery across machines: an MPI job on two "hosts" (network namespaces,
// the set-up of multihost_test.cc and docs/multi-machine.md) under the supervisor with
// --hosts and --min-nproc 1. Mid-run the second host goes away for good: its processes are
// SIGKILLed and its launch agent stops answering for it (its line leaves the agent's map, as
// ssh to a dead machine fails). The supervisor finds the host silent, leaves it out, and the
// job finishes on the first host alone from the newest valid checkpoint, with the weights of
// an uninterrupted run (--deterministic: the same on 2 workers as on 1). Needs root; skipped
// with the reason otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "netns_util.h"
#include "test_env.h"

namespace lockstep::testing {
namespace {

constexpr int kSteps = 60;

// The newest complete checkpoint's step under <out>/checkpoints (0 if none).
int64_t NewestCheckpointStep(const std::string& out) {
  int64_t newest = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(out + "/checkpoints", ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() == 13 && name.rfind("step-", 0) == 0)
      newest = std::max<int64_t>(newest, std::stoll(name.substr(5)));
  }
  return newest;
}

// `hier`: --backend hier, two workers a host (one process a host), else --backend mpi with
// one worker a host.
void LoseHostMidRun(bool hier) {
  const int per_host = hier ? 2 : 1;
  if (std::string why = WhyNoNamespaces(); !why.empty()) LOCKSTEP_SKIP_OUTSIDE_CI(why);
  RemoveStaleNamespaces();
  NetnsPair net;
  if (std::string why = net.Create(); !why.empty())
    LOCKSTEP_SKIP_OUTSIDE_CI("cannot create network namespaces here: " << why);

  RemovedAtExit cleanup;
  const std::string work = MakeTempDir("emh"), out = MakeTempDir("emh-run");
  cleanup.dirs = {work, out};
  const std::string source = LOCKSTEP_SOURCE_DIR, map = work + "/netns.map";
  {
    std::ofstream m(map);
    m << kAddrA << " " << net.ns_a() << "\n" << kAddrB << " " << net.ns_b() << "\n";
  }
  std::vector<std::string> flags = TinyGptFlags();
  for (const std::string& a : {std::string("--steps"), std::to_string(kSteps), std::string("--deterministic"),
                               std::string("--set"), std::string("checkpoint.every=4"), std::string("--set"),
                               std::string("checkpoint.keep=3"), std::string("--set"), std::string("train.threads=1")})
    flags.push_back(a);

  // The reference: one process, no faults.
  std::vector<std::string> one = flags;
  one.insert(one.begin(), "train");
  for (const std::string& a : {std::string("--nproc"), std::string("1"), std::string("--out"), work + "/ref"})
    one.push_back(a);
  CommandResult single = RunLockstep(one);
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const std::string want = DoneHash(work + "/ref");
  ASSERT_EQ(want.size(), 16u);

  // The supervisor runs on host a; mpirun reaches host b through the netns agent.
  std::string train = Quote(std::string(LOCKSTEP_BINARY_DIR) + "/lockstep") + " train";
  for (const std::string& a : flags) {
    train += ' ';
    train += Quote(a);
  }
  // (Appended piece by piece: one long `+` chain gives GCC 12 a false -Wrestrict warning.)
  const std::string slots = ":" + std::to_string(per_host);
  train += hier ? " --backend hier --hosts " : " --backend mpi --hosts ";
  train += kAddrA + slots;
  train += ",";
  train += kAddrB + slots;
  train += " --mpi-if " + net.Common();
  train += " --max-restarts 3 --min-nproc 1 --heartbeat-timeout 20 --out " + Quote(out);
  // Host b's (first) worker computes 5x slower in the first attempt (a sleep, no change to the
  // numbers), so the two-host job is still running when the test takes b away.
  train += " --inject-fault slow:rank=" + std::to_string(per_host) + ":factor=5";
  const std::string mpirun_args = std::string("--mca plm_rsh_agent ") + source +
                                  "/scripts/netns-agent.sh --mca plm_rsh_no_tree_spawn 1"
                                  " --mca orte_keep_fqdn_hostnames 1 --mca btl_tcp_if_include " +
                                  kSubnet + " --mca oob_tcp_if_include " + kSubnet + " --wdir " + source;
  const std::string cmd = "cd " + Quote(source) + " && exec timeout -k 5 100 ip netns exec " + net.ns_a() +
                          " env LOCKSTEP_NETNS_MAP=" + Quote(map) + " LOCKSTEP_MPIRUN_ARGS=" + Quote(mpirun_args) +
                          " OMPI_MCA_btl=self,tcp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + train +
                          " >" + Quote(work + "/log") + " 2>&1 </dev/null";
  pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }

  // Once the two-host job has committed a checkpoint, host b goes away for good.
  bool lost = false;
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 900 && !exited; ++i) {
    exited = waitpid(job, &status, WNOHANG) == job;
    if (!lost && NewestCheckpointStep(out) >= 8) {
      std::ofstream(map, std::ios::trunc) << kAddrA << " " << net.ns_a() << "\n";  // b: no answer
      Sh("ip netns pids " + net.ns_b() + " | xargs -r kill -9");
      lost = true;
    }
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!exited) {
    kill(job, SIGKILL);
    waitpid(job, &status, 0);
  }
  const std::string log = ReadLines(work + "/log").empty() ? "" : [&] {
    std::string all;
    for (const std::string& l : ReadLines(work + "/log")) all += l + "\n";
    return all;
  }();
  ASSERT_TRUE(exited) << "the job did not end within 90 s\n" << log;
  ASSERT_TRUE(lost) << "the job ended before host b could be taken away\n" << log;
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << "\n" << log;

  std::vector<nlohmann::json> changed;
  for (const std::string& l : ReadLines(out + "/metrics.jsonl")) {
    auto j = nlohmann::json::parse(l);
    if (j.value("event", "") == "world_changed") changed.push_back(j);
  }
  ASSERT_EQ(changed.size(), 1u) << log;
  EXPECT_EQ(changed[0]["from"], 2 * per_host);
  EXPECT_EQ(changed[0]["to"], per_host);
  EXPECT_NE(changed[0]["reason"].get<std::string>().find(std::string("host ") + kAddrB + " does not answer"),
            std::string::npos)
      << changed[0].dump();
  EXPECT_GE(changed[0]["step"].get<int64_t>(), 8);
  EXPECT_NE(log.find("on " + std::to_string(per_host) + " worker(s)"), std::string::npos) << log;
  // The last attempt's hostfile names host a alone (one process a host: slots=1 either way).
  EXPECT_EQ(ReadLines(out + "/hostfile").back(), std::string(kAddrA) + " slots=1");
  EXPECT_EQ(DoneHash(out), want) << log;
  EXPECT_EQ(Events(out, "start").front()["backend"], hier ? "hier" : "mpi");
}

TEST(ElasticMultiHost, HostLostMidRunFinishesOnTheOtherWithTheSameHash) { LoseHostMidRun(false); }

// One process a host, two worker threads each: the host goes as a whole (4 workers -> 2).
TEST(ElasticMultiHost, HierHostLostMidRunFinishesOnTheOtherWithTheSameHash) { LoseHostMidRun(true); }

}  // namespace
}  // namespace lockstep::testing
