// Whether a host of an MPI run still answers: the supervisor runs `AGENT HOST true` with the
// launch agent mpirun itself uses to start its daemons there (OpenMPI's plm_rsh_agent: ssh by
// default, scripts/netns-agent.sh in the multi-host test), so a host counts as gone exactly
// when mpirun could not reach it either.
#pragma once

#include <string>

#include "lockstep/comm/mpi/launch.h"
#include "lockstep/core/status.h"

namespace lockstep::runtime {

// The agent mpirun will use: "--mca plm_rsh_agent X" in the job's mpirun arguments, else
// OMPI_MCA_plm_rsh_agent, else srun inside a Slurm allocation (setup/slurm_env.h), else "ssh"
// (run with BatchMode, so a password prompt is a failure).
std::string LaunchAgent(const comm::MpirunSetup& mpirun);

// Ok when `agent host true` exits 0 within timeout_s; otherwise Unavailable with what happened
// (exit status and the first line it printed, or the timeout). The host this process runs on
// ("localhost", 127.x, its own host name) answers without the agent when the agent is ssh.
Status ProbeHost(const std::string& agent, const std::string& host, double timeout_s);

}  // namespace lockstep::runtime
