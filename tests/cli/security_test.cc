// What a run exposes (docs/security.md), checked on the live processes:
// - a one-machine `--backend mpi` job listens on nothing reachable from outside this machine:
//   every listening TCP socket of mpirun and its ranks (their socket inodes under /proc/PID/fd,
//   found in their own network namespace's /proc/PID/net/tcp{,6}) is bound to loopback, or lives
//   in a network namespace whose only interface is `lo`; none is in this machine's namespace;
// - the threads backend opens no socket at all;
// - --mpi-if is required when hosts are named, refused otherwise;
// - run directories, checkpoints and metrics are not writable by others even under umask 0.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "cli/cli_test_util.h"
#include "test_env.h"

namespace lockstep::testing {
namespace {

std::string ReadLink(const std::string& path) {
  char buf[512];
  const ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Starts build/lockstep `args` in the source directory, output into `log_dir`/{out,err}.
pid_t Start(const std::vector<std::string>& args, const std::string& log_dir) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (chdir(LOCKSTEP_SOURCE_DIR) != 0) _exit(120);
  const int out = open((log_dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = open((log_dir + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(out, 1);
  dup2(err, 2);
  const std::string binary = std::string(LOCKSTEP_BINARY_DIR) + "/lockstep";
  std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(binary.c_str(), argv.data());
  _exit(127);
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// `root` and every process below it.
std::vector<pid_t> ProcessTree(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  DIR* proc = opendir("/proc");
  for (dirent* e; proc && (e = readdir(proc));) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    children.emplace(ppid, pid);
  }
  if (proc) closedir(proc);
  std::vector<pid_t> tree = {root};
  for (size_t i = 0; i < tree.size(); ++i) {
    auto [lo, hi] = children.equal_range(tree[i]);
    for (auto it = lo; it != hi; ++it) tree.push_back(it->second);
  }
  return tree;
}

std::set<std::string> SocketInodes(pid_t pid) {
  std::set<std::string> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  for (dirent* e; d && (e = readdir(d));) {
    const std::string target = ReadLink(dir + "/" + e->d_name);
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  if (d) closedir(d);
  return inodes;
}

struct Listener {
  std::string address;  // hex, as /proc/net/tcp{,6} write it
  bool v6 = false;
};

// LISTEN sockets of a network namespace's tables (those `pid` sees), by inode.
std::map<std::string, Listener> Listeners(const std::string& proc_net) {
  std::map<std::string, Listener> out;
  for (const char* table : {"tcp", "tcp6"}) {
    std::ifstream in(proc_net + "/" + table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (st == "0A") out[inode] = {local.substr(0, local.find(':')), std::string(table) == "tcp6"};
    }
  }
  return out;
}

bool IsLoopback(const Listener& l) {
  if (!l.v6) return l.address.size() == 8 && l.address.substr(6, 2) == "7F";  // 127.x.x.x, little-endian
  return l.address == "00000000000000000000000001000000" ||                   // ::1
         (l.address.substr(0, 24) == "0000000000000000FFFF0000" && l.address.substr(30, 2) == "7F");
}

std::set<std::string> Interfaces(pid_t pid) {
  std::set<std::string> names;
  std::ifstream in("/proc/" + std::to_string(pid) + "/net/dev");
  std::string line;
  for (int i = 0; std::getline(in, line); ++i) {
    if (i < 2) continue;
    const size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    names.insert(name);
  }
  return names;
}

std::vector<std::string> TrainArgs(const std::string& out, int steps, const std::vector<std::string>& extra) {
  std::vector<std::string> a = TinyTrainArgs(out, steps, 0, extra);
  for (const char* kv : {"model.layers=2", "model.width=64", "model.context=64", "train.log_every=1000"}) {
    a.push_back("--set");
    a.push_back(kv);
  }
  return a;
}

bool HasTrainingRow(const std::string& dir) {
  for (const std::string& line : ReadLines(dir + "/metrics.jsonl"))
    if (line.find("\"loss\"") != std::string::npos) return true;
  return false;
}

TEST(Security, OneMachineMpiJobListensOnLoopbackOnly) {
  const std::string dir = MakeTempDir("security-mpi");
  const pid_t job = Start(TrainArgs(dir, 400, {"--backend", "mpi", "--nproc", "2"}), dir);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!HasTrainingRow(dir) && std::chrono::steady_clock::now() < deadline && waitpid(job, nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(HasTrainingRow(dir)) << "the job never trained a step";
  const auto err_text = [&] {
    std::ifstream err(dir + "/err");
    return std::string((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  };
  if (err_text().find("no network namespace of its own") != std::string::npos) {
    kill(job, SIGTERM);  // mpirun passes it on to the ranks
    Wait(job);
    LOCKSTEP_SKIP_OUTSIDE_CI(
        "this machine lets no process make a network namespace (as MultiHost needs too): " << err_text());
  }

  const std::string my_net = ReadLink("/proc/self/ns/net");
  const std::map<std::string, Listener> host_listeners = Listeners("/proc/self/net");
  int listening = 0, processes = 0;
  for (pid_t pid : ProcessTree(job)) {
    ++processes;
    const std::string proc = "/proc/" + std::to_string(pid);
    const std::map<std::string, Listener> own = Listeners(proc + "/net");
    const std::string net = ReadLink(proc + "/ns/net");
    const std::set<std::string> interfaces = Interfaces(pid);
    for (const std::string& inode : SocketInodes(pid)) {
      EXPECT_EQ(host_listeners.count(inode), 0u) << "pid " << pid << " listens in this machine's network";
      auto it = own.find(inode);
      if (it == own.end()) continue;
      ++listening;
      const bool lo_only_namespace = net != my_net && interfaces == std::set<std::string>{"lo"};
      EXPECT_TRUE(IsLoopback(it->second) || lo_only_namespace)
          << "pid " << pid << " (" << ReadLink(proc + "/exe") << ") listens on " << it->second.address << " in network "
          << net << " with interfaces " << interfaces.size();
    }
  }
  EXPECT_GE(processes, 4);  // lockstep, mpirun, two ranks
  EXPECT_GT(listening, 0);  // mpirun's own listeners were found: the scan sees them
  EXPECT_EQ(Wait(job), 0) << ReadLines(dir + "/err").size();
  EXPECT_EQ(DoneHash(dir).size(), 16u);
  std::filesystem::remove_all(dir);
}

TEST(Security, ThreadsBackendOpensNoSocket) {
  const std::string dir = MakeTempDir("security-threads");
  const pid_t job = Start(TrainArgs(dir, 60, {"--nproc", "2"}), dir);
  int polls = 0, alive_polls = 0;
  std::set<std::string> seen;
  while (waitpid(job, nullptr, WNOHANG) == 0) {
    const std::set<std::string> now = SocketInodes(job);
    seen.insert(now.begin(), now.end());
    alive_polls += ReadLink("/proc/" + std::to_string(job) + "/exe").find("lockstep") != std::string::npos;
    ++polls;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(seen.empty()) << seen.size() << " socket(s), e.g. inode " << *seen.begin();
  EXPECT_GT(alive_polls, 20) << "too few looks at the running process to mean anything";
  EXPECT_EQ(DoneHash(dir).size(), 16u);
  std::filesystem::remove_all(dir);
}

TEST(Security, MpiInterfaceIsRequiredWithHostsAndOnlyThen) {
  const std::string dir = MakeTempDir("security-if");
  const std::vector<std::string> mpi = {"--backend", "mpi", "--nproc", "2"};
  setenv("LOCKSTEP_MPIRUN_ARGS", "--hostfile /nonexistent/hosts", 1);
  CommandResult r = RunLockstep(TrainArgs(dir, 2, mpi));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "lockstep: error: LOCKSTEP_MPIRUN_ARGS names other hosts: --mpi-if IFACE is required, the network "
            "interface that connects them (OpenMPI's channels are pinned to it)\n");
  std::vector<std::string> bad_if = TrainArgs(dir, 2, mpi);
  bad_if.insert(bad_if.end(), {"--mpi-if", "nosuchif0"});
  r = RunLockstep(bad_if);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "lockstep: error: --mpi-if nosuchif0: this machine has no network interface of that name\n");
  unsetenv("LOCKSTEP_MPIRUN_ARGS");
  std::vector<std::string> one_machine = TrainArgs(dir, 2, mpi);
  one_machine.insert(one_machine.end(), {"--mpi-if", "lo"});
  r = RunLockstep(one_machine);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--mpi-if lo is for a job over several hosts"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(Security, RunFilesAreNotWritableByOthersEvenUnderUmaskZero) {
  const std::string parent = MakeTempDir("security-perms");
  const std::string dir = parent + "/run";
  const mode_t old = umask(0);  // inherited by the run
  CommandResult r = RunLockstep(TinyTrainArgs(dir, 4, 2, {}));
  umask(old);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int checked = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    struct stat st {};
    ASSERT_EQ(lstat(e.path().c_str(), &st), 0);
    if (S_ISLNK(st.st_mode)) continue;
    EXPECT_EQ(st.st_mode & S_IWOTH, 0u) << e.path() << " is writable by others";
    ++checked;
  }
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & (S_IWOTH | S_IWGRP), 0u) << dir;
  EXPECT_GT(checked, 5);  // metrics, checkpoint directories, shards, manifests
  std::filesystem::remove_all(parent);
}

}  // namespace
}  // namespace lockstep::testing
