#include "lockstep/comm/hier/hier_world.h"

#include <string>

#include "lockstep/comm/hier/hier_communicator.h"
#include "lockstep/comm/mpi/mpi_communicator.h"
#include "lockstep/comm/threads/threads_world.h"

namespace lockstep::comm {

Result<std::vector<std::shared_ptr<Communicator>>> CreateHierWorld(int workers_per_host) {
  if (workers_per_host < 1 || workers_per_host > ThreadsWorld::kMaxSize)
    return Status::InvalidArgument("hier: workers per host " + std::to_string(workers_per_host) + " is not in [1, " +
                                   std::to_string(ThreadsWorld::kMaxSize) + "]");
  LS_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> host_comm, CreateMpiCommunicator());
  // Every process must run the same number of workers (world rank = host * L + local).
  int32_t extremes[2] = {workers_per_host, -workers_per_host};
  LS_RETURN_IF_ERROR(host_comm->Allreduce(extremes, extremes, 2, DType::kI32, ReduceOp::kMax)->Wait());
  if (extremes[0] != -extremes[1])
    return Status::InvalidArgument("hier: the host processes run different numbers of workers (" +
                                   std::to_string(-extremes[1]) + " to " + std::to_string(extremes[0]) +
                                   "); every host needs the same");
  if (host_comm->size() == 1) return CreateThreadsGroup(workers_per_host);
  if (workers_per_host == 1) return std::vector<std::shared_ptr<Communicator>>{host_comm};
  // One mpi communicator across hosts for each local index: each local worker drives its own.
  std::vector<std::shared_ptr<Communicator>> cross(workers_per_host);
  for (auto& c : cross) {
    LS_ASSIGN_OR_RETURN(c, host_comm->Split(0, host_comm->rank()));
  }
  LS_ASSIGN_OR_RETURN(std::shared_ptr<MpiChannel> channel, MpiChannel::Create(*host_comm));
  auto context = std::make_shared<hier_detail::HostContext>(host_comm, channel, workers_per_host);
  std::vector<std::shared_ptr<Communicator>> local = CreateThreadsGroup(workers_per_host);
  std::vector<std::shared_ptr<Communicator>> world(workers_per_host);
  for (int j = 0; j < workers_per_host; ++j)
    world[j] = std::make_shared<hier_detail::HierCommunicator>(context, local[j], cross[j]);
  return world;
}

}  // namespace lockstep::comm
