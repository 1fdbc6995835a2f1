// The hierarchical backend ("hier"): one process per host, its workers as threads, one MPI
// communicator between the host processes. Collectives are two-level, as NCCL and Horovod do
// between NVLink and the network: inside a host the threads backend (shared memory), across
// hosts the mpi backend, every local worker driving its own share of the network at once:
//   allreduce       reduce-scatter inside the host, each local worker allreduces its shard
//                   across hosts, all-gather inside the host
//   reduce_scatter  reduce-scatter inside the host (blocks regrouped by local worker), then
//                   reduce-scatter across hosts
//   all_gather      all-gather across hosts, then inside the host (blocks regrouped back)
//   broadcast/reduce  across hosts by the root's local worker, inside each host by the others
//   deterministic   the host's contributions in the threads backend's fixed tree (a complete
//                   subtree), then the hosts' partials in the upper tree across hosts: the
//                   same bits as every other backend at any world size
// World rank = host * workers_per_host + local index, so the workers of a host are adjacent
// (the mesh puts tensor-parallel groups there). Split children that stay inside a host are
// threads communicators, those with one member a host are mpi communicators, the rest are
// hierarchical again; a child must be host-major with equal members on each host it spans.
// Point-to-point across hosts goes over the mpi communicator of the two workers' local index
// when it is the same (pipeline stages in Megatron's rank order), else over a channel of the
// host processes that any thread may use (MPI_THREAD_MULTIPLE, comm/mpi/mpi_channel.h).
#pragma once

#include <memory>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/result.h"

namespace lockstep::comm {

// Collective over the MPI job (every process calls it once, from one thread): this process's
// `workers_per_host` communicators, element j for local worker j (world rank
// process_rank * workers_per_host + j). InvalidArgument when the processes disagree on
// workers_per_host. One process: a threads world; one worker a host: the mpi backend.
Result<std::vector<std::shared_ptr<Communicator>>> CreateHierWorld(int workers_per_host);

}  // namespace lockstep::comm
