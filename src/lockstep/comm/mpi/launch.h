// Running a lockstep executable as an MPI job: detecting mpirun, and re-executing the
// current program under it (so `lockstep train --backend mpi --nproc 4` and the MPI tests
// need no launcher on the command line).
#pragma once

#include <string>
#include <vector>

#include "lockstep/core/status.h"

namespace lockstep::comm {

// True when this process was started by OpenMPI's mpirun/orterun (it sets
// OMPI_COMM_WORLD_SIZE in every rank's environment).
bool InsideMpirun();

// Whether LOCKSTEP_MPIRUN_ARGS names other hosts (--hostfile, --machinefile, --host, -H): a
// job over several machines.
bool MpirunArgsNameHosts();

// The network the job may use, checked before the relaunch (InvalidArgument, one line, for a
// bad combination). One machine (no hosts named, `interface` empty): mpirun and every rank run
// in a network namespace of their own that has only the loopback interface, so nothing they
// listen on can be reached from outside this machine (OpenMPI's runtime binds its listening
// ports to the wildcard address whatever oob_tcp_if_include says); where a namespace cannot
// be made (no privilege for it), the run goes on in the host's network with a warning.
// Several machines: `interface` is required and OpenMPI's control (oob) and data (btl tcp)
// channels are pinned to it; the job then says so on standard error.
// Call once, before RelaunchUnderMpirun / RunUnderMpirun.
Status ConfigureMpiNetwork(const std::string& interface);

// Runs
//   mpirun -np N --oversubscribe [--allow-run-as-root] --bind-to none
//          --mca btl self,vader[,tcp] <this executable> argv[1..] extra_args...
// (tcp, and the interface pins of ConfigureMpiNetwork, only when hosts are named)
// and returns its exit status (128+signal if mpirun itself died from a signal, 127 if it
// could not be started). The executable is /proc/self/exe, so a relative argv[0] or a
// changed working directory does not matter. SIGINT and SIGTERM received while waiting are
// forwarded to mpirun, which forwards them to the ranks. `--allow-run-as-root` is added
// when running as root. A `btl` choice from the environment (OMPI_MCA_btl) wins over the
// default, and LOCKSTEP_MPIRUN_ARGS (split on spaces) is inserted before the executable,
// e.g. LOCKSTEP_MPIRUN_ARGS="--hostfile hosts" for several machines.
// Must be called before MPI is initialized in this process. Blocks until mpirun exits.
int RelaunchUnderMpirun(int nproc, int argc, char** argv, const std::vector<std::string>& extra_args);

// RelaunchUnderMpirun with `env` ("NAME=value") added to mpirun's environment (mpirun passes
// it on to the ranks it starts) and, when `stdout_text` is not null, mpirun's standard output
// captured into it instead of printed (standard error passes through).
int RunUnderMpirun(int nproc, int argc, char** argv, const std::vector<std::string>& extra_args,
                   const std::vector<std::string>& env, std::string* stdout_text);

// The argument vector RelaunchUnderMpirun executes (exposed for tests and log lines).
std::vector<std::string> MpirunCommandLine(int nproc, int argc, char** argv,
                                           const std::vector<std::string>& extra_args);

}  // namespace lockstep::comm
