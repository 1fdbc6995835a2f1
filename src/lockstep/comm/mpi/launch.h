// Running a lockstep executable as an MPI job: detecting mpirun, and re-executing the
// current program under it (so `lockstep train --backend mpi --nproc 4` and the MPI tests
// need no launcher on the command line).
#pragma once

#include <string>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/core/status.h"

namespace lockstep::comm {

// True when this process is one rank of an MPI job started for it: by OpenMPI's
// mpirun/orterun (it sets OMPI_COMM_WORLD_SIZE in every rank's environment), or by Slurm's
// `srun --mpi=pmix` with more than one task (SLURM_STEP_NUM_TASKS and a PMI server's
// variables; MPI_Init then finds the other tasks through Slurm).
bool InsideMpirun();

// The processes of that job, known before MPI starts (OMPI_COMM_WORLD_SIZE, else
// SLURM_STEP_NUM_TASKS); 1 outside one.
int MpiJobProcesses();

// How an MPI job is started beyond its rank count, read once and passed explicitly (the
// launch of `train`, `bench-comm` and `plan` each build one and hand it to the calls below).
struct MpirunSetup {
  // Inserted before the executable: LOCKSTEP_MPIRUN_ARGS split on spaces (how a user passes
  // mpirun options, e.g. "--hostfile hosts"), then what lockstep adds (setup/hosts.h).
  std::vector<std::string> args;
  // --mpi-if: the network interface OpenMPI's control (oob) and data (btl tcp) channels are
  // pinned to in a job over several hosts; "" on one machine.
  std::string interface;

  // args from LOCKSTEP_MPIRUN_ARGS, no interface.
  static MpirunSetup FromEnvironment();
  // Whether args name other hosts (--hostfile, --machinefile, --host, -H): several machines.
  bool NamesHosts() const;
  // The value of "--mca NAME VALUE" in args ("" when absent).
  std::string McaParameter(const std::string& name) const;
};

// The network the job may use, checked before the launch (InvalidArgument, one line, for a
// bad combination). One machine (no hosts named, no interface): mpirun and every rank run in
// a network namespace of their own that has only the loopback interface, so nothing they
// listen on can be reached from outside this machine (OpenMPI's runtime binds its listening
// ports to the wildcard address whatever oob_tcp_if_include says); where a namespace cannot
// be made (no privilege for it), the run goes on in the host's network with a warning.
// Several machines: the interface is required and OpenMPI's channels are pinned to it; the
// job then says so on standard error.
Status CheckMpiNetwork(const MpirunSetup& setup);

// The network interface of this machine that reaches `hosts` (the one whose IPv4 subnet holds
// their addresses, as resolved here), for a job whose hosts lockstep knows (--hosts,
// --hostfile, a Slurm allocation) but whose --mpi-if is not given. Hosts that resolve to
// loopback only are this machine and say nothing. InvalidArgument (one line) when a host
// resolves to no subnet of this machine, or the hosts sit behind different interfaces: then
// --mpi-if must name it.
Result<std::string> InterfaceReaching(const std::vector<std::string>& hosts);

// Runs
//   mpirun -np N --oversubscribe [--allow-run-as-root] --bind-to none
//          --mca btl self,vader[,tcp] <setup.args> <this executable> argv[1..] extra_args...
// (tcp, and the interface pins, only when hosts are named) and returns its exit status
// (128+signal if mpirun itself died from a signal, 127 if it could not be started). The
// executable is /proc/self/exe, so a relative argv[0] or a changed working directory does not
// matter. SIGINT and SIGTERM received while waiting are forwarded to mpirun, which forwards
// them to the ranks. `--allow-run-as-root` is added when running as root. A `btl` choice from
// the environment (OMPI_MCA_btl) wins over the default.
// Must be called before MPI is initialized in this process. Blocks until mpirun exits.
int RelaunchUnderMpirun(const MpirunSetup& setup, int nproc, int argc, char** argv,
                        const std::vector<std::string>& extra_args);

// RelaunchUnderMpirun with `env` ("NAME=value") added to mpirun's environment (mpirun passes
// it on to the ranks it starts) and, when `stdout_text` is not null, mpirun's standard output
// captured into it instead of printed (standard error passes through).
int RunUnderMpirun(const MpirunSetup& setup, int nproc, int argc, char** argv,
                   const std::vector<std::string>& extra_args, const std::vector<std::string>& env,
                   std::string* stdout_text);

// The argument vector RelaunchUnderMpirun executes (exposed for tests and log lines).
std::vector<std::string> MpirunCommandLine(const MpirunSetup& setup, int nproc, int argc, char** argv,
                                           const std::vector<std::string>& extra_args);

}  // namespace lockstep::comm
