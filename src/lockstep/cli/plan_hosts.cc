#include "lockstep/cli/plan_hosts.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "lockstep/comm/mpi/launch.h"

namespace lockstep::cli {
namespace {

using planner::CommCurve;
using planner::CommOp;
using planner::CommTable;

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// Runs this executable with `args` (argv[1..]), its standard output captured (standard error
// passes through); the exit status (127: could not start it).
int RunCaptured(const std::vector<std::string>& args, std::string* out) {
  std::vector<std::string> all = {"lockstep"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return 127;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return 127;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) != 0;) {
    if (n > 0) out->append(buf, static_cast<size_t>(n));
    else if (errno != EINTR) break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// One bench-comm --hosts run: `ops` over per_host[i] workers on host i.
Status MeasurePlacement(const PlanHostsSetup& setup, const std::string& backend, const std::vector<int>& per_host,
                        int group, const std::string& ops, int64_t max_bytes, CommTable* table) {
  std::string spec;
  for (size_t i = 0; i < per_host.size(); ++i)
    spec += (i ? "," : "") + setup.hosts[i].name + ":" + std::to_string(per_host[i]);
  const bool equal = std::adjacent_find(per_host.begin(), per_host.end(), std::not_equal_to<>()) == per_host.end();
  // 10 timed iterations a size (bench-comm's default runs up to 1000 of the small ones, which
  // over a slow link takes minutes for what 10 tell).
  std::vector<std::string> args = {"bench-comm", "--hosts",   spec, "--op", ops, "--min-bytes", "4096",
                                   "--max-bytes", std::to_string(max_bytes), "--iters", "10", "--json",
                                   "--mpi-if", setup.interface};
  if (backend == "mpi" || !equal) args.insert(args.end(), {"--backend", "mpi"});
  std::string out;
  const int rc = RunCaptured(args, &out);
  if (rc != 0)
    return Status::Internal("plan: bench-comm --hosts " + spec + " --op " + ops + " failed (status " +
                            std::to_string(rc) + ")");
  AddBenchLines(out, group, static_cast<int>(per_host.size()), table);
  return Status::Ok();
}

}  // namespace

CommOp ToCommOp(BenchOp op) {
  switch (op) {
    case BenchOp::kAllreduce:
      return CommOp::kAllreduce;
    case BenchOp::kReduceScatter:
      return CommOp::kReduceScatter;
    case BenchOp::kAllGather:
      return CommOp::kAllGather;
    case BenchOp::kBroadcast:
      return CommOp::kSend;  // a broadcast between two ranks is one send
  }
  return CommOp::kAllreduce;
}

// bench-comm --json lines ({"op", "bytes", "time_us"}) into `table` for `group` on `hosts`.
void AddBenchLines(const std::string& out, int group, int hosts, CommTable* table) {
  std::map<std::string, CommCurve> curves;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("op") || !j.contains("bytes") || !j.contains("time_us")) continue;
    curves[j["op"].get<std::string>()].Add(j["bytes"].get<int64_t>(), j["time_us"].get<double>() * 1e-3);
  }
  for (BenchOp b : {BenchOp::kAllreduce, BenchOp::kReduceScatter, BenchOp::kAllGather, BenchOp::kBroadcast})
    if (auto it = curves.find(BenchOpName(b)); it != curves.end()) table->Set(ToCommOp(b), group, it->second, hosts);
}

int PrintHostFacts() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::printf("%s\n", nlohmann::json({{"host", name},
                                      {"boot_id", BootId()},
                                      {"cores", std::max(1u, std::thread::hardware_concurrency())}})
                          .dump()
                          .c_str());
  std::fflush(stdout);
  return 0;
}

Result<PlanHostsSetup> ResolvePlanHosts(const std::string& hosts_flag, const std::string& hostfile,
                                        const std::string& mpi_interface, bool nproc_given, char* argv0,
                                        planner::PlanOptions* o) {
  PlanHostsSetup setup;
  if (!hosts_flag.empty() && !hostfile.empty())
    return Status::InvalidArgument("--hosts and --hostfile exclude each other");
  if (!hosts_flag.empty()) {
    LS_ASSIGN_OR_RETURN(setup.hosts, runtime::ParseHosts(hosts_flag));
  } else {
    LS_ASSIGN_OR_RETURN(setup.hosts, runtime::ReadHostfile(hostfile));
  }
  LS_RETURN_IF_ERROR(runtime::CheckEqualSlots(setup.hosts));
  const int slots = runtime::TotalSlots(setup.hosts);
  if (nproc_given && o->nproc != slots)
    return Status::InvalidArgument("--nproc " + std::to_string(o->nproc) + " differs from the " +
                                   std::to_string(slots) + " slots of the hosts (" +
                                   runtime::FormatHosts(setup.hosts) + "); leave --nproc out");
  o->nproc = slots;
  o->hosts.spec = runtime::FormatHosts(setup.hosts);
  o->hosts.count = static_cast<int>(setup.hosts.size());
  o->hosts.workers_per_host = setup.hosts.front().slots;
  setup.interface = mpi_interface;
  if (setup.interface.empty()) {
    LS_ASSIGN_OR_RETURN(setup.interface, runtime::InterfaceReaching(setup.hosts));
  }
  // Each host's facts: this command with --host-facts, one process a host.
  comm::MpirunSetup mpirun = comm::MpirunSetup::FromEnvironment();
  LS_ASSIGN_OR_RETURN(const std::string path, runtime::WriteTempHostfile("plan", setup.hosts, true,
                                                                       "written by lockstep plan: one process a host"));
  mpirun.args.insert(mpirun.args.end(), {"--hostfile", path});
  mpirun.interface = setup.interface;
  std::string out;
  Status net = comm::CheckMpiNetwork(mpirun);
  int rc = 0;
  if (net.ok()) {
    char plan[] = "plan", facts[] = "--host-facts";
    char* av[] = {argv0, plan, facts, nullptr};
    rc = comm::RunUnderMpirun(mpirun, o->hosts.count, 3, av, {}, {}, &out);
  }
  unlink(path.c_str());
  LS_RETURN_IF_ERROR(net);
  if (rc != 0)
    return Status::Internal("plan: asking the hosts for their cores under mpirun failed (status " +
                            std::to_string(rc) + ")");
  std::set<std::string> boots;
  int answered = 0, cores = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("boot_id") || !j.contains("cores")) continue;
    ++answered;
    boots.insert(j["boot_id"].get<std::string>());
    const int c = j["cores"].get<int>();
    cores = cores == 0 ? c : std::min(cores, c);
  }
  if (answered != o->hosts.count)
    return Status::Internal("plan: " + std::to_string(answered) + " of " + std::to_string(o->hosts.count) +
                            " hosts told their cores");
  o->hosts.cores = cores;
  o->hosts.share_cores = boots.size() == 1 && *boots.begin() == BootId();
  return setup;
}

Result<CommTable> MeasureAcrossHosts(const PlanHostsSetup& setup, const std::string& backend,
                                     const std::vector<planner::HostGroup>& groups, bool send, int64_t max_bytes) {
  CommTable table;
  for (const planner::HostGroup& g : groups)
    for (const char* op : {"allreduce", "reduce_scatter", "all_gather"})
      LS_RETURN_IF_ERROR(MeasurePlacement(setup, backend, g.per_host, g.group, op, max_bytes, &table));
  if (send) LS_RETURN_IF_ERROR(MeasurePlacement(setup, backend, {1, 1}, 2, "broadcast", max_bytes, &table));
  return table;
}

}  // namespace lockstep::cli
