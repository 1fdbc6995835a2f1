#include "comm/mpi_test_util.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace lockstep::comm::testing {

MpirunResult RunCapturingOutput(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  MpirunResult result;
  char path[] = "/tmp/lockstep-mpirun-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return result;
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> cargv;
    for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execvp(cargv[0], cargv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  lseek(fd, 0, SEEK_SET);
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) result.output.append(buf, n);
  close(fd);
  unlink(path);
  return result;
}

MpirunResult RunCurrentTestUnderMpirun(int nproc, const std::vector<std::string>& env) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string filter = std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  char self[] = "test";
  char* argv[] = {self, nullptr};
  std::vector<std::string> cmd = MpirunCommandLine(MpirunSetup::FromEnvironment(), nproc, 1, argv, {filter});
  // Sanitizer builds: OpenMPI's own leaks are suppressed in the ranks (no-op otherwise).
  std::vector<std::string> full_env = env;
  const char* lsan = std::getenv("LSAN_OPTIONS");
  full_env.push_back(std::string("LSAN_OPTIONS=") + (lsan && *lsan ? std::string(lsan) + ":" : "") +
                     "suppressions=" LOCKSTEP_SOURCE_DIR "/tests/comm/lsan_mpi.supp:print_suppressions=0");
  return RunCapturingOutput(cmd, full_env);
}

void ExpectMpirunPasses(int nproc, const std::vector<std::string>& env) {
  MpirunResult r = RunCurrentTestUnderMpirun(nproc, env);
  const size_t tail = 6000;
  EXPECT_EQ(r.exit_status, 0) << "mpirun -np " << nproc << " output (tail):\n"
                              << (r.output.size() > tail ? r.output.substr(r.output.size() - tail) : r.output);
}

std::shared_ptr<Communicator> WorldPtr() {
  static std::shared_ptr<Communicator> world = [] {
    SetDefaultTimeout(std::chrono::seconds(8));
    auto c = CreateMpiCommunicator();
    if (!c.ok()) {
      std::fprintf(stderr, "CreateMpiCommunicator: %s\n", c.status().ToString().c_str());
      std::abort();
    }
    return std::move(c).value();
  }();
  return world;
}

Communicator& World() { return *WorldPtr(); }

}  // namespace lockstep::comm::testing
