#include "lockstep/runtime/launch/train.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "lockstep/comm/hier/hier_world.h"
#include "lockstep/comm/mpi/launch.h"
#include "lockstep/comm/mpi/mpi_communicator.h"
#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/core/machine.h"
#include "lockstep/parallel/mesh.h"
#include "lockstep/runtime/setup/config_keys.h"
#include "lockstep/runtime/setup/run_setup.h"
#include "lockstep/runtime/training/worker.h"

namespace lockstep::runtime {
namespace {

// The layout flags are checked before anything starts (under mpirun every rank would print
// the same error otherwise); the rest of the layout is checked by ResolveLayout.
Status CheckSupported(const TrainOptions& o) {
  LS_RETURN_IF_ERROR(parallel::ParallelDims::Parse(o.layout, o.nproc, o.zero).status());
  return Status::Ok();
}

// Runs a worker on a thread for each communicator of this process (element 0 on this thread).
Status RunWorkerThreads(const RunSetup& setup, const std::vector<std::shared_ptr<comm::Communicator>>& world) {
  const int n = static_cast<int>(world.size());
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r) threads.emplace_back([&, r] { results[r] = RunWorker(setup, world[r]); });
  results[0] = RunWorker(setup, world[0]);
  for (auto& t : threads) t.join();
  // The first rank's own error explains more than the Aborted its peers saw.
  for (const Status& s : results)
    if (!s.ok() && s.code() != StatusCode::kAborted) return s;
  for (const Status& s : results)
    if (!s.ok()) return s;
  return Status::Ok();
}

Status RunThreads(const Job& job, const TrainOptions& options) {
  LS_ASSIGN_OR_RETURN(RunSetup setup, SetUpRun(job, options, options.nproc));
  setup.rss_baseline_bytes = ResidentBytes();
  return RunWorkerThreads(setup, comm::CreateThreadsGroup(options.nproc));
}

// hier: this process is one host; its share of the world's workers run as threads.
Status RunHierHost(const Job& job, const TrainOptions& options) {
  const int processes = comm::MpiJobProcesses();
  if (options.nproc % processes != 0)
    return Status::InvalidArgument("--nproc " + std::to_string(options.nproc) + " workers do not divide among " +
                                   std::to_string(processes) + " host processes");
  LS_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<comm::Communicator>> world,
                      comm::CreateHierWorld(options.nproc / processes));
  LS_ASSIGN_OR_RETURN(RunSetup setup, SetUpRun(job, options, options.nproc));
  setup.rss_baseline_bytes = ResidentBytes();
  return RunWorkerThreads(setup, world);
}

Status RunMpiRank(const Job& job, const TrainOptions& options) {
  LS_ASSIGN_OR_RETURN(std::shared_ptr<comm::Communicator> comm, comm::CreateMpiCommunicator());
  Result<RunSetup> setup = SetUpRun(job, options, comm->size());
  if (!setup.ok()) return setup.status();
  setup->rss_baseline_bytes = ResidentBytes();
  return RunWorker(*setup, comm);
}

}  // namespace

Status RunTrain(const Job& job, const TrainOptions& options) {
  LS_RETURN_IF_ERROR(CheckSupported(options));
  if (options.print_config) {
    LS_ASSIGN_OR_RETURN(RunSetup setup, SetUpRun(job, options, options.nproc));
    std::fputs(DescribeConfig(setup.config, job.config_keys).c_str(), stdout);
    return Status::Ok();
  }
  if (options.backend == "mpi") return RunMpiRank(job, options);
  if (options.backend == "hier") return RunHierHost(job, options);
  return RunThreads(job, options);
}

}  // namespace lockstep::runtime
