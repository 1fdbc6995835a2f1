#include "lockstep/train.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "lockstep/api/train_flags.h"
#include "lockstep/comm/mpi/launch.h"
#include "lockstep/runtime/launch/train.h"
#include "lockstep/runtime/recovery/heartbeat.h"
#include "lockstep/runtime/recovery/supervisor.h"
#include "lockstep/runtime/setup/fault_spec.h"
#include "lockstep/runtime/setup/hosts.h"
#include "lockstep/runtime/setup/slurm_env.h"

namespace lockstep {
namespace {

// The CLI11 checks of the flags, for options built in code.
Status CheckOptions(const TrainOptions& o) {
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (o.nproc < 1 || o.nproc > 4096) return bad("nproc " + std::to_string(o.nproc) + " is not in [1, 4096]");
  if (o.backend != "threads" && o.backend != "mpi" && o.backend != "hier")
    return bad("backend \"" + o.backend + "\": expected threads, mpi or hier");
  if (o.zero < 0 || o.zero > 3) return bad("zero " + std::to_string(o.zero) + ": expected 0, 1, 2 or 3");
  if (o.max_restarts < 0) return bad("max_restarts must be >= 0");
  if (!(o.heartbeat_timeout_s > 0)) return bad("heartbeat_timeout_s must be > 0");
  if (o.steps >= 0 && o.epochs >= 0) return bad("steps and epochs exclude each other");
  if (o.mem_limit < 0) return bad("mem_limit must be >= 0");
  if (o.min_nproc < 0 || o.min_nproc > 4096)
    return bad("min_nproc " + std::to_string(o.min_nproc) + " is not in [1, 4096]");
  if (o.max_nproc < 0 || o.max_nproc > 4096)
    return bad("max_nproc " + std::to_string(o.max_nproc) + " is not in [1, 4096]");
  return Status::Ok();
}

// This program's own command line, to start it again under mpirun.
std::vector<std::string> OwnCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return args;
}

// mpirun's exit status as a Status: the ranks printed their own error line already.
Status FromMpirunExit(int code) {
  if (code == 0) return Status::Ok();
  if (code == 2) return Status::InvalidArgument("");
  if (code == 3) return Status::NonFinite("");
  if (code == 4) return Status::Unavailable("");
  return Status::Aborted("mpirun exited with status " + std::to_string(code));
}

// Train, except that a relaunch under mpirun hands back mpirun's exit status (>= 0), which the
// command returns as its own.
struct Launched {
  Status status;
  int mpirun_exit = -1;
};

Launched Launch(const Job& job, const TrainOptions& given) {
  if (Status s = CheckOptions(given); !s.ok()) return {s};
  TrainOptions options = given;
  // The host and elastic flags against each other (ParseTrainFlags has already put the hosts'
  // slots into nproc when --nproc was not given; options built in code say nproc themselves).
  if (Status s = runtime::ApplySlurmJob(&options, /*nproc_given=*/true); !s.ok()) return {s};
  if (Status s = runtime::ApplyHostsToNproc(&options, /*nproc_given=*/true); !s.ok()) return {s};
  const bool supervised = std::getenv(runtime::kHeartbeatDirEnv) != nullptr;
  // A restart attempt does not inject the first attempt's fault again (the supervisor passes
  // no --inject-fault then; options built in code would still carry it), except a permanent
  // kill whose rank is still in this world: a lost machine stays lost (the supervisor's
  // FaultFor passes it on for the same reason).
  if (std::getenv(runtime::kRestartEnv) != nullptr) {
    Result<runtime::FaultSpec> f = runtime::ParseFaultSpec(options.inject_fault, options.nproc, INT64_MAX);
    if (!(f.ok() && f->permanent && f->rank < options.nproc)) options.inject_fault.clear();
  }
  if (options.print_config) return {runtime::RunTrain(job, options)};  // plans only, in this process
  // The supervisor comes first: it runs the whole job (mpirun included) as its child.
  if (options.max_restarts > 0 && !supervised && !comm::InsideMpirun()) {
    if (options.command.empty())
      return {Status::InvalidArgument(
          "max_restarts: the supervisor restarts this program with the trainer's flags; read them with "
          "lockstep::ParseTrainFlags (or use lockstep::TrainMain)")};
    return {runtime::RunSupervised(options, job)};
  }
  // mpi: a process a worker; hier: a process a host, its workers threads.
  // (With hosts even one host process goes through mpirun: the host may not be this machine.)
  const bool hier = options.backend == "hier" &&
                    (options.workers_per_host < options.nproc || !options.hosts.empty() || !options.hostfile.empty());
  if ((options.backend == "mpi" || hier) && !comm::InsideMpirun()) {
    comm::MpirunSetup mpirun = comm::MpirunSetup::FromEnvironment();
    mpirun.interface = options.mpi_interface;
    if (Status s = runtime::AddHostfileToMpirun(options, &mpirun); !s.ok()) return {s};
    // Hosts lockstep knows and no --mpi-if: the interface on their subnet.
    if (Result<std::vector<runtime::Host>> hosts = runtime::HostsOf(options);
        mpirun.interface.empty() && hosts.ok() && !hosts->empty()) {
      Result<std::string> interface = runtime::InterfaceReaching(*hosts);
      if (!interface.ok()) return {interface.status()};
      mpirun.interface = *interface;
    }
    if (Status s = comm::CheckMpiNetwork(mpirun); !s.ok()) return {s};
    std::vector<std::string> args = OwnCommandLine();
    // Hosts that did not come from the command line (a Slurm allocation's nodes) are passed
    // on to the ranks, which see only mpirun's environment.
    // (--hostfile leaves options.hosts empty: the file is on the command line already.)
    const bool hosts_given = std::any_of(
        args.begin(), args.end(), [](const std::string& a) { return a == "--hosts" || a.rfind("--hosts=", 0) == 0; });
    if (!options.hosts.empty() && !hosts_given) {
      args.push_back("--hosts");
      args.push_back(options.hosts);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int processes = hier ? options.nproc / options.workers_per_host : options.nproc;
    return {Status::Ok(), comm::RelaunchUnderMpirun(mpirun, processes, static_cast<int>(args.size()), argv.data(), {})};
  }
  return {runtime::RunTrain(job, options)};
}

}  // namespace

Status Train(const Job& job, const TrainOptions& options) {
  Launched r = Launch(job, options);
  return r.mpirun_exit >= 0 ? FromMpirunExit(r.mpirun_exit) : r.status;
}

Result<TrainFlags> ParseTrainFlags(int argc, const char* const* argv, TrainOptions defaults) {
  api::FlagValues flags{std::move(defaults), {}, {}};
  CLI::App app{"trains with lockstep; the flags of `lockstep train`"};
  api::AddTrainFlags(&app, &flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return TrainFlags{std::move(flags.options), /*help=*/true};
  } catch (const CLI::ParseError& err) {
    return Status::InvalidArgument(err.what());
  }
  LS_RETURN_IF_ERROR(api::FinishTrainFlags(&flags));
  flags.options.command = {argc > 0 ? argv[0] : "program"};
  return TrainFlags{std::move(flags.options), /*help=*/false};
}

int ExitCodeFor(const Status& s, const std::string& program) {
  if (s.ok()) return 0;
  // An empty message: the error was already printed (by a supervised worker or an MPI rank).
  if (!s.message().empty()) std::fprintf(stderr, "%s: error: %s\n", program.c_str(), s.message().c_str());
  if (s.code() == StatusCode::kNonFinite) return 3;
  if (s.code() == StatusCode::kUnavailable) return 4;  // fewer workers left than --min-nproc
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? 2 : 1;
}

int TrainMain(int argc, const char* const* argv, const Job& job, TrainOptions defaults) {
  std::string program = argc > 0 ? argv[0] : "train";
  if (const size_t slash = program.rfind('/'); slash != std::string::npos) program = program.substr(slash + 1);
  Result<TrainFlags> flags = ParseTrainFlags(argc, argv, std::move(defaults));
  if (!flags.ok()) return ExitCodeFor(flags.status(), program);
  if (flags->help) return 0;
  Launched r = Launch(job, flags->options);
  return r.mpirun_exit >= 0 ? r.mpirun_exit : ExitCodeFor(r.status, program);
}

namespace api {

// The command's `train`: the same launch, with mpirun's own exit status passed through.
int RunTrainCommand(const Job& job, const TrainOptions& options) {
  Launched r = Launch(job, options);
  return r.mpirun_exit >= 0 ? r.mpirun_exit : ExitCodeFor(r.status, "lockstep");
}

}  // namespace api
}  // namespace lockstep
