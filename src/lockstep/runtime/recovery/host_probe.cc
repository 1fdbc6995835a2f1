#include "lockstep/runtime/recovery/host_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "lockstep/runtime/setup/slurm_env.h"

namespace lockstep::runtime {
namespace {

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool IsThisHost(const std::string& host) {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == name;
}

}  // namespace

std::string LaunchAgent(const comm::MpirunSetup& mpirun) {
  if (std::string agent = mpirun.McaParameter("plm_rsh_agent"); !agent.empty()) return agent;
  if (const char* agent = std::getenv("OMPI_MCA_plm_rsh_agent"); agent != nullptr && *agent != '\0') return agent;
  // Inside a Slurm allocation mpirun starts its daemons with srun (OpenMPI's plm_slurm).
  if (std::string agent = SlurmProbeAgent(); !agent.empty()) return agent;
  return "ssh";
}

Status ProbeHost(const std::string& agent, const std::string& host, double timeout_s) {
  const bool ssh = agent == "ssh";
  if (ssh && IsThisHost(host)) return Status::Ok();
  // The agent may carry its own arguments ("ssh -p 2222"), as OpenMPI allows: a shell splits it.
  const std::string cmd = agent + (ssh ? " -o BatchMode=yes" : "") + " " + ShellQuote(host) + " true";
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::Unavailable(std::string("pipe: ") + std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::Unavailable(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(fds[1]);
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  bool exited = false, timed_out = false;
  while (!exited) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      char buf[512];
      ssize_t n = ::read(fds[0], buf, sizeof(buf));
      if (n > 0 && output.size() < 4096) output.append(buf, static_cast<size_t>(n));
    }
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!exited && std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
  }
  ::close(fds[0]);
  ::kill(-pid, SIGKILL);  // anything the agent left behind
  if (!timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  const std::string first = output.substr(0, output.find('\n'));
  char what[96];
  if (timed_out)
    std::snprintf(what, sizeof(what), "no answer within %.0f s", timeout_s);
  else if (WIFEXITED(status))
    std::snprintf(what, sizeof(what), "exit status %d", WEXITSTATUS(status));
  else
    std::snprintf(what, sizeof(what), "killed by signal %d", WTERMSIG(status));
  return Status::Unavailable("`" + cmd + "`: " + what + (first.empty() ? "" : ": " + first));
}

}  // namespace lockstep::runtime
