#include "lockstep/runtime/setup/hosts.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lockstep/parallel/mesh.h"
#include "lockstep/runtime/setup/run_setup.h"
#include "lockstep/runtime/setup/worker_env.h"

namespace lockstep::runtime {
namespace {

bool ParseSlots(const std::string& s, int* out) {
  if (s.empty() || s.size() > 5) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *out = std::stoi(s);
  return *out > 0;
}

bool ValidName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name)
    if (c <= ' ' || c == ',' || c == ':' || c == '#' || c == '\'' || c == '"') return false;
  return true;
}

Status CheckUnique(const std::vector<Host>& hosts, const std::string& where) {
  for (size_t i = 0; i < hosts.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (hosts[i].name == hosts[j].name)
        return Status::InvalidArgument(where + ": host '" + hosts[i].name + "' is listed twice");
  if (hosts.empty()) return Status::InvalidArgument(where + ": no hosts");
  return Status::Ok();
}

}  // namespace

Result<std::vector<Host>> ParseHosts(const std::string& text) {
  std::vector<Host> hosts;
  std::stringstream ss(text);
  for (std::string entry; std::getline(ss, entry, ',');) {
    Host h;
    const size_t colon = entry.rfind(':');
    h.name = entry.substr(0, colon);
    if (colon != std::string::npos && !ParseSlots(entry.substr(colon + 1), &h.slots))
      return Status::InvalidArgument("--hosts '" + text + "': '" + entry + "': slots must be a positive integer");
    if (!ValidName(h.name))
      return Status::InvalidArgument("--hosts '" + text + "': '" + entry + "' is not HOST or HOST:SLOTS");
    hosts.push_back(h);
  }
  LS_RETURN_IF_ERROR(CheckUnique(hosts, "--hosts '" + text + "'"));
  return hosts;
}

Result<std::vector<Host>> ReadHostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("--hostfile '" + path + "': cannot read it");
  std::vector<Host> hosts;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    Host h;
    if (!(words >> h.name)) continue;
    if (!ValidName(h.name))
      return Status::InvalidArgument("--hostfile " + path + ":" + std::to_string(number) + ": bad host name '" +
                                     h.name + "'");
    for (std::string w; words >> w;) {
      if (w.rfind("slots=", 0) == 0 && !ParseSlots(w.substr(6), &h.slots))
        return Status::InvalidArgument("--hostfile " + path + ":" + std::to_string(number) + ": '" + w +
                                       "': slots must be a positive integer");
    }
    hosts.push_back(h);
  }
  LS_RETURN_IF_ERROR(CheckUnique(hosts, "--hostfile " + path));
  return hosts;
}

std::string FormatHosts(const std::vector<Host>& hosts) {
  std::string s;
  for (const Host& h : hosts) s += (s.empty() ? "" : ",") + h.name + ":" + std::to_string(h.slots);
  return s;
}

int TotalSlots(const std::vector<Host>& hosts) {
  int n = 0;
  for (const Host& h : hosts) n += h.slots;
  return n;
}

Result<std::vector<Host>> HostsOf(const TrainOptions& options) {
  if (!options.hosts.empty()) return ParseHosts(options.hosts);
  if (!options.hostfile.empty()) return ReadHostfile(options.hostfile);
  return std::vector<Host>{};
}

Status CheckEqualSlots(const std::vector<Host>& hosts) {
  for (const Host& h : hosts)
    if (h.slots != hosts.front().slots)
      return Status::InvalidArgument("--hosts " + FormatHosts(hosts) +
                                     ": every host needs the same number of workers with one process a host "
                                     "(--backend mpi takes unequal hosts)");
  return Status::Ok();
}

Status WriteHostfile(const std::string& path, const std::vector<Host>& hosts, bool one_process_a_host,
                     const std::string& header) {
  std::ofstream out(path, std::ios::trunc);
  out << "# " << header << "\n";
  for (const Host& h : hosts) out << h.name << " slots=" << (one_process_a_host ? 1 : h.slots) << "\n";
  out.close();
  if (!out) return Status::IoError("cannot write " + path);
  return Status::Ok();
}

Result<std::string> WriteTempHostfile(const std::string& tag, const std::vector<Host>& hosts, bool one_process_a_host,
                                      const std::string& header) {
  std::string path = "/tmp/lockstep-" + tag + "-hosts.XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) return Status::IoError(std::string("cannot create a hostfile in /tmp: ") + std::strerror(errno));
  close(fd);
  if (Status s = WriteHostfile(path, hosts, one_process_a_host, header); !s.ok()) {
    unlink(path.c_str());
    return s;
  }
  return path;
}

Result<std::string> InterfaceReaching(const std::vector<Host>& hosts) {
  std::vector<std::string> names;
  for (const Host& h : hosts) names.push_back(h.name);
  return comm::InterfaceReaching(names);
}

Status ApplyHostsToNproc(TrainOptions* o, bool nproc_given) {
  if (!o->hosts.empty() && !o->hostfile.empty()) return Status::InvalidArgument("give --hosts or --hostfile, not both");
  if ((o->min_nproc > 0 || o->max_nproc > 0) && o->max_restarts == 0)
    return Status::InvalidArgument(std::string(o->min_nproc > 0 ? "--min-nproc" : "--max-nproc") +
                                   " changes the world on a restart: it needs --max-restarts R");
  if (o->max_nproc > 0 && o->min_nproc == 0)
    return Status::InvalidArgument("--max-nproc needs --min-nproc (the elastic mode it grows back in)");
  LS_ASSIGN_OR_RETURN(std::vector<Host> hosts, HostsOf(*o));
  if (o->workers_per_host < 0) return Status::InvalidArgument("--workers-per-host must be >= 1");
  if (o->workers_per_host > 0 && o->backend == "mpi")
    return Status::InvalidArgument("--workers-per-host runs threads in each host process: not with --backend mpi");
  // Hosts (or --workers-per-host) without --backend mpi: one process a host, its workers as
  // threads (comm/hier/hier_world.h).
  if ((!hosts.empty() || o->workers_per_host > 0) && o->backend == "threads") o->backend = "hier";
  if (o->backend == "hier" && !hosts.empty()) {
    LS_RETURN_IF_ERROR(CheckEqualSlots(hosts));
    if (o->workers_per_host > 0 && o->workers_per_host != hosts.front().slots)
      return Status::InvalidArgument("--workers-per-host " + std::to_string(o->workers_per_host) +
                                     " differs from the hosts' " + std::to_string(hosts.front().slots) + " slots");
    o->workers_per_host = hosts.front().slots;
  }
  if (!nproc_given && !hosts.empty()) o->nproc = TotalSlots(hosts);
  if (o->backend == "hier") {
    // Under an MPI launcher of P processes (the user's mpirun, srun): nproc / P a process.
    const int processes = comm::InsideMpirun() ? comm::MpiJobProcesses() : 1;
    if (o->workers_per_host == 0) o->workers_per_host = o->nproc % processes == 0 ? o->nproc / processes : o->nproc;
    if (o->nproc % o->workers_per_host != 0)
      return Status::InvalidArgument("--nproc " + std::to_string(o->nproc) +
                                     " is not a multiple of --workers-per-host " + std::to_string(o->workers_per_host) +
                                     " (every host runs as many)");
    // Megatron's rule: a tensor-parallel group talks every layer, so it stays inside a host.
    // Ranks of one tp group are adjacent (parallel/mesh.h), so it does when tp divides the
    // host's workers.
    Result<parallel::ParallelDims> dims = parallel::ParallelDims::Parse(o->layout, o->nproc, o->zero);
    if (dims.ok() && o->workers_per_host % dims->tp != 0)
      return Status::InvalidArgument(
          "--layout tp=" + std::to_string(dims->tp) + " would split a tensor-parallel group across hosts (" +
          std::to_string(o->workers_per_host) + " workers a host): tp must divide the workers of a host");
  }
  return Status::Ok();
}

Status AddHostfileToMpirun(const TrainOptions& options, comm::MpirunSetup* mpirun) {
  LS_ASSIGN_OR_RETURN(std::vector<Host> hosts, HostsOf(options));
  if (hosts.empty()) return Status::Ok();
  // hier: one process a host on the first nproc / workers-per-host hosts (an elastic restart
  // may keep hosts it does not use).
  if (options.nproc > TotalSlots(hosts))
    return Status::InvalidArgument("--nproc " + std::to_string(options.nproc) + " is more than the " +
                                   std::to_string(TotalSlots(hosts)) + " slots of the hosts " + FormatHosts(hosts));
  const std::string dir = std::filesystem::absolute(OutDirFor(options)).string();
  if (dir.find_first_of(" \t\n") != std::string::npos)
    return Status::InvalidArgument("--out '" + dir + "': with hosts the path must not contain white space");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/hostfile";
  LS_RETURN_IF_ERROR(WriteHostfile(path, hosts, options.backend == "hier",
                                   "written by lockstep train: the hosts of this attempt, ranks in this order"));
  mpirun->args.insert(mpirun->args.end(), {"--hostfile", path});
  // mpirun passes its environment to the ranks of its own host only.
  for (const char* var : {kHeartbeatDirEnv, kRestartEnv})
    if (std::getenv(var) != nullptr) mpirun->args.insert(mpirun->args.end(), {"-x", var});
  return Status::Ok();
}

}  // namespace lockstep::runtime
