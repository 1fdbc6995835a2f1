// Harness for the mpi backend's tests. A test body runs twice: outside mpirun it re-executes
// the test binary under `mpirun -np N` with --gtest_filter naming only itself and checks the
// job's exit status; inside mpirun (every rank) it runs the real checks against World().
//
//   TEST(MpiCollectives, Np2) {
//     if (!InsideMpirun()) return ExpectMpirunPasses(2);
//     Communicator& comm = World();
//     ...
//   }
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/comm/mpi/launch.h"
#include "lockstep/comm/mpi/mpi_communicator.h"

namespace lockstep::comm::testing {

struct MpirunResult {
  int exit_status = -1;
  std::string output;  // stdout and stderr of all ranks, interleaved
};

// Runs the current test (by its full gtest name) under `mpirun -np nproc`, with `env`
// ("NAME=value") added to the environment, and returns its exit status and output.
MpirunResult RunCurrentTestUnderMpirun(int nproc, const std::vector<std::string>& env = {});

// RunCurrentTestUnderMpirun, then EXPECT exit status 0 (printing the output's tail if not).
void ExpectMpirunPasses(int nproc, const std::vector<std::string>& env = {});

// The world communicator of this MPI process, created on first use (with a test default
// timeout of 8 s, so that a failing rank does not leave the others waiting long).
Communicator& World();
std::shared_ptr<Communicator> WorldPtr();

// Runs `argv` with `env` added, output captured; returns exit status (128+signal on a signal).
MpirunResult RunCapturingOutput(const std::vector<std::string>& argv, const std::vector<std::string>& env);

}  // namespace lockstep::comm::testing
