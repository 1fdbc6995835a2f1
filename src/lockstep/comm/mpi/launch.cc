#include "lockstep/comm/mpi/launch.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace lockstep::comm {
namespace {

std::atomic<pid_t> g_child{0};

void ForwardSignal(int sig) {
  pid_t child = g_child.load();
  if (child > 0) kill(child, sig);
}

std::string SelfExecutable(const char* argv0) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return argv0 ? argv0 : "";
  buf[n] = '\0';
  return buf;
}

}  // namespace

bool InsideMpirun() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size != nullptr && size[0] != '\0';
}

std::vector<std::string> MpirunCommandLine(int nproc, int argc, char** argv,
                                           const std::vector<std::string>& extra_args) {
  std::vector<std::string> cmd = {"mpirun", "-np", std::to_string(nproc), "--oversubscribe"};
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.push_back("--bind-to");
  cmd.push_back("none");
  // Shared memory between ranks of one machine, TCP between machines. Leaving the choice to
  // OpenMPI would also probe InfiniBand/OFI and print warnings on machines without them.
  const char* btl = std::getenv("OMPI_MCA_btl");
  if (btl == nullptr || btl[0] == '\0') {
    for (const char* a : {"--mca", "btl", "self,vader,tcp"}) cmd.push_back(a);
  }
  if (const char* extra = std::getenv("LOCKSTEP_MPIRUN_ARGS")) {
    std::istringstream words(extra);
    for (std::string w; words >> w;) cmd.push_back(w);
  }
  cmd.push_back(SelfExecutable(argc > 0 ? argv[0] : nullptr));
  for (int i = 1; i < argc; ++i) cmd.push_back(argv[i]);
  for (const std::string& a : extra_args) cmd.push_back(a);
  return cmd;
}

int RelaunchUnderMpirun(int nproc, int argc, char** argv, const std::vector<std::string>& extra_args) {
  return RunUnderMpirun(nproc, argc, argv, extra_args, {}, nullptr);
}

int RunUnderMpirun(int nproc, int argc, char** argv, const std::vector<std::string>& extra_args,
                   const std::vector<std::string>& env, std::string* stdout_text) {
  std::vector<std::string> cmd = MpirunCommandLine(nproc, argc, argv, extra_args);
  std::vector<char*> cargv;
  for (std::string& s : cmd) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env_copy = env;  // putenv keeps the pointers

  int pipe_fds[2] = {-1, -1};
  if (stdout_text != nullptr && pipe(pipe_fds) != 0) return 127;
  std::fflush(stdout);
  std::fflush(stderr);
  struct sigaction forward = {}, old_int = {}, old_term = {};
  forward.sa_handler = ForwardSignal;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGINT, &forward, &old_int);
  sigaction(SIGTERM, &forward, &old_term);
  auto restore = [&] {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  };

  pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "lockstep: fork for mpirun failed: %s\n", std::strerror(errno));
    restore();
    if (pipe_fds[0] >= 0) {
      close(pipe_fds[0]);
      close(pipe_fds[1]);
    }
    return 127;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (pipe_fds[1] >= 0) {
      dup2(pipe_fds[1], 1);
      close(pipe_fds[0]);
      close(pipe_fds[1]);
    }
    for (std::string& kv : env_copy) putenv(kv.data());
    execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "lockstep: cannot run mpirun: %s (install openmpi-bin)\n", std::strerror(errno));
    _exit(127);
  }
  g_child.store(pid);
  if (pipe_fds[0] >= 0) {
    close(pipe_fds[1]);
    char buf[4096];
    for (;;) {
      ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
      if (n > 0) {
        stdout_text->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
    close(pipe_fds[0]);
  }
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  g_child.store(0);
  restore();
  if (r < 0) return 127;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace lockstep::comm
