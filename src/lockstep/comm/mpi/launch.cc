#include "lockstep/comm/mpi/launch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "lockstep/comm/mpi/private_network.h"

namespace lockstep::comm {
namespace {

std::atomic<pid_t> g_child{0};

// One machine, unless asked otherwise: LOCKSTEP_MPI_HOST_NETWORK=1 keeps the job in the host's
// network namespace (for debugging it with tools that look there).
bool UsePrivateNetwork(const MpirunSetup& setup) {
  const char* host = std::getenv("LOCKSTEP_MPI_HOST_NETWORK");
  return !setup.NamesHosts() && !(host != nullptr && std::string(host) == "1");
}

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

// Forks and executes mpirun (cargv); -1 when it could not. With private_network the child
// first moves into a network namespace of its own (private_network.h); when that fails it
// reports why through a close-on-exec pipe instead of executing, and *network_error says it.
pid_t Spawn(std::vector<char*>& cargv, std::vector<std::string>& env, const int stdout_pipe[2],
            const struct sigaction& old_int, const struct sigaction& old_term, bool private_network,
            std::string* network_error) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "lockstep: fork for mpirun failed: %s\n", std::strerror(errno));
    close(report[0]);
    close(report[1]);
    return -1;
  }
  if (pid == 0) {
    close(report[0]);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (private_network) {
      const std::string why = EnterPrivateNetwork();
      if (!why.empty()) {
        (void)!write(report[1], why.data(), why.size());
        _exit(126);
      }
    }
    if (stdout_pipe[1] >= 0) {
      dup2(stdout_pipe[1], 1);
      close(stdout_pipe[0]);
      close(stdout_pipe[1]);
    }
    for (std::string& kv : env) putenv(kv.data());
    execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "lockstep: cannot run mpirun: %s (install openmpi-bin)\n", std::strerror(errno));
    _exit(127);
  }
  close(report[1]);
  std::string why;
  char buf[512];
  for (ssize_t n; (n = read(report[0], buf, sizeof(buf))) != 0;) {
    if (n > 0) why.append(buf, static_cast<size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  close(report[0]);
  if (why.empty()) return pid;  // the pipe closed on exec
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
  *network_error = why;
  return -1;
}

}  // namespace

namespace {

int PositiveEnv(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::max(0, std::atoi(v)) : 0;
}

}  // namespace

bool InsideMpirun() {
  if (PositiveEnv("OMPI_COMM_WORLD_SIZE") > 0) return true;
  // srun --mpi=pmix (or pmi2) starts the ranks itself: its step says how many, the PMI
  // server's variables say MPI can find the others.
  const bool pmi = std::getenv("PMIX_RANK") != nullptr || std::getenv("PMI_RANK") != nullptr;
  return std::getenv("SLURM_STEP_ID") != nullptr && pmi && PositiveEnv("SLURM_STEP_NUM_TASKS") > 1;
}

int MpiJobProcesses() {
  if (const int n = PositiveEnv("OMPI_COMM_WORLD_SIZE"); n > 0) return n;
  if (InsideMpirun()) return PositiveEnv("SLURM_STEP_NUM_TASKS");
  return 1;
}

MpirunSetup MpirunSetup::FromEnvironment() {
  MpirunSetup setup;
  if (const char* extra = std::getenv("LOCKSTEP_MPIRUN_ARGS")) {
    std::istringstream in(extra);
    for (std::string w; in >> w;) setup.args.push_back(w);
  }
  return setup;
}

bool MpirunSetup::NamesHosts() const {
  for (const std::string& w : args)
    for (const char* flag : {"--hostfile", "-hostfile", "--machinefile", "-machinefile", "--host", "-host", "-H"})
      if (w == flag || w.rfind(std::string(flag) + "=", 0) == 0) return true;
  return false;
}

std::string MpirunSetup::McaParameter(const std::string& name) const {
  for (size_t i = 0; i + 2 < args.size(); ++i)
    if ((args[i] == "--mca" || args[i] == "-mca") && args[i + 1] == name) return args[i + 2];
  return "";
}

Status CheckMpiNetwork(const MpirunSetup& setup) {
  const bool hosts = setup.NamesHosts();
  const std::string& interface = setup.interface;
  if (hosts && interface.empty())
    return Status::InvalidArgument(
        "LOCKSTEP_MPIRUN_ARGS names other hosts: --mpi-if IFACE is required, the network interface that connects "
        "them (OpenMPI's channels are pinned to it)");
  if (!hosts && !interface.empty())
    return Status::InvalidArgument("--mpi-if " + interface +
                                   " is for a job over several hosts (LOCKSTEP_MPIRUN_ARGS with --hostfile or "
                                   "--host); a one-machine job uses loopback only");
  if (!interface.empty() && ::if_nametoindex(interface.c_str()) == 0)
    return Status::InvalidArgument("--mpi-if " + interface + ": this machine has no network interface of that name");
  return Status::Ok();
}

Result<std::string> InterfaceReaching(const std::vector<std::string>& hosts) {
  struct ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return Status::IoError(std::string("getifaddrs: ") + std::strerror(errno));
  std::string chosen, chosen_for;
  Status result = Status::Ok();
  for (const std::string& host : hosts) {
    struct addrinfo hints = {};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
      result = Status::InvalidArgument("host '" + host +
                                       "' does not resolve here, so the interface that reaches it is unknown: name "
                                       "it with --mpi-if IFACE");
      break;
    }
    std::string name, address;
    bool loopback_only = true;
    for (struct addrinfo* a = found; a != nullptr && name.empty(); a = a->ai_next) {
      const in_addr_t ip = reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr;
      char text[INET_ADDRSTRLEN] = "";
      inet_ntop(AF_INET, &ip, text, sizeof text);
      address = text;
      if ((ntohl(ip) >> 24) == 127) continue;
      loopback_only = false;
      for (struct ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_netmask == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
        if ((i->ifa_flags & IFF_LOOPBACK) != 0 || (i->ifa_flags & IFF_UP) == 0) continue;
        const in_addr_t mine = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
        const in_addr_t mask = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr;
        if (((mine ^ ip) & mask) == 0) {
          name = i->ifa_name;
          break;
        }
      }
    }
    freeaddrinfo(found);
    if (loopback_only) continue;
    if (name.empty()) {
      result = Status::InvalidArgument("host '" + host + "' (" + address +
                                       ") is on no subnet of this machine's interfaces: name the interface that "
                                       "reaches it with --mpi-if IFACE");
      break;
    }
    if (!chosen.empty() && name != chosen) {
      result = Status::InvalidArgument("hosts '" + chosen_for + "' and '" + host + "' are reached through " + chosen +
                                       " and " + name + ": name the one interface to use with --mpi-if IFACE");
      break;
    }
    chosen = name;
    chosen_for = host;
  }
  freeifaddrs(all);
  if (!result.ok()) return result;
  if (chosen.empty())
    return Status::InvalidArgument(
        "every host resolves to loopback: name the interface that reaches them with --mpi-if IFACE");
  return chosen;
}

std::vector<std::string> MpirunCommandLine(const MpirunSetup& setup, int nproc, int argc, char** argv,
                                           const std::vector<std::string>& extra_args) {
  std::vector<std::string> cmd = {"mpirun", "-np", std::to_string(nproc), "--oversubscribe"};
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.push_back("--bind-to");
  cmd.push_back("none");
  // Shared memory between ranks of one machine, TCP between machines (one machine: no TCP
  // transport, so the ranks listen on nothing). Leaving the choice to OpenMPI would also probe
  // InfiniBand/OFI and print warnings on machines without them.
  const bool hosts = setup.NamesHosts();
  const char* btl = std::getenv("OMPI_MCA_btl");
  if (btl == nullptr || btl[0] == '\0') {
    for (const char* a : {"--mca", "btl", hosts ? "self,vader,tcp" : "self,vader"}) cmd.push_back(a);
  }
  if (hosts && !setup.interface.empty()) {
    for (const char* channel : {"oob_tcp_if_include", "btl_tcp_if_include"}) {
      // What the user's arguments set themselves wins (mpirun refuses a parameter listed
      // twice), as OMPI_MCA_btl does for the transports above.
      if (!setup.McaParameter(channel).empty()) continue;
      cmd.push_back("--mca");
      cmd.push_back(channel);
      cmd.push_back(setup.interface);
    }
  }
  for (const std::string& w : setup.args) cmd.push_back(w);
  cmd.push_back(SelfExecutable(argc > 0 ? argv[0] : nullptr));
  for (int i = 1; i < argc; ++i) cmd.push_back(argv[i]);
  for (const std::string& a : extra_args) cmd.push_back(a);
  return cmd;
}

int RelaunchUnderMpirun(const MpirunSetup& setup, int nproc, int argc, char** argv,
                        const std::vector<std::string>& extra_args) {
  return RunUnderMpirun(setup, nproc, argc, argv, extra_args, {}, nullptr);
}

int RunUnderMpirun(const MpirunSetup& setup, int nproc, int argc, char** argv,
                   const std::vector<std::string>& extra_args, const std::vector<std::string>& env,
                   std::string* stdout_text) {
  std::vector<std::string> cmd = MpirunCommandLine(setup, nproc, argc, argv, extra_args);
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

  const bool private_network = UsePrivateNetwork(setup);
  if (!setup.interface.empty())
    std::fprintf(stderr,
                 "lockstep: MPI job over several hosts: OpenMPI's control and data channels use "
                 "interface %s only; its listening ports bind every address of each host, so keep the hosts on a "
                 "private network (docs/security.md)\n",
                 setup.interface.c_str());
  std::string network_error;
  pid_t pid = Spawn(cargv, env_copy, pipe_fds, old_int, old_term, private_network, &network_error);
  if (pid < 0 && !network_error.empty()) {
    std::fprintf(stderr,
                 "lockstep: warning: the MPI job runs in this machine's network: no network namespace of its own "
                 "(%s), and OpenMPI's runtime listens on every interface (docs/security.md)\n",
                 network_error.c_str());
    pid = Spawn(cargv, env_copy, pipe_fds, old_int, old_term, false, &network_error);
  }
  if (pid < 0) {
    restore();
    if (pipe_fds[0] >= 0) {
      close(pipe_fds[0]);
      close(pipe_fds[1]);
    }
    return 127;
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
