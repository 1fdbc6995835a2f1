#include "lockstep/runtime/launch/train.h"

#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

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

Status RunThreads(const Job& job, const TrainOptions& options) {
  LS_ASSIGN_OR_RETURN(RunSetup setup, SetUpRun(job, options, options.nproc));
  setup.rss_baseline_bytes = ResidentBytes();
  comm::ThreadsWorld world(options.nproc);
  std::vector<Status> results(options.nproc);
  std::vector<std::thread> threads;
  for (int r = 1; r < options.nproc; ++r)
    threads.emplace_back([&, r] { results[r] = RunWorker(setup, world.Rank(r)); });
  results[0] = RunWorker(setup, world.Rank(0));
  for (auto& t : threads) t.join();
  // The first rank's own error explains more than the Aborted its peers saw.
  for (const Status& s : results)
    if (!s.ok() && s.code() != StatusCode::kAborted) return s;
  for (const Status& s : results)
    if (!s.ok()) return s;
  return Status::Ok();
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
  return RunThreads(job, options);
}

}  // namespace lockstep::runtime
