// Where a layout's groups fall when its N workers sit on H hosts of L workers each (`lockstep
// plan --hosts`): hosts take consecutive blocks of L ranks (mpirun's order, setup/hosts.h) and
// the mesh numbers ranks tp fastest, then dp, then pp (parallel/mesh.h). From that the planner
// knows which collectives cross a host's link, over how many hosts, and how many groups share
// each host's link at once; a CommTable curve is then looked up for the group as it is placed.
#pragma once

#include <vector>

#include "lockstep/parallel/mesh.h"

namespace lockstep::planner {

struct HostPlacement {
  // The data-parallel group that spans the most hosts (the one a step waits for): the hosts it
  // spans (1: inside one host) and its members on each of them, in host order.
  int dp_hosts = 1;
  std::vector<int> dp_per_host;
  // dp groups that run their collectives at once over one host's link (the tp x pp groups with
  // members on that host): each gets that share of the link. 1 inside a host.
  int dp_share = 1;
  // A pipeline stage's activation crosses from one host to another, and how many ranks of one
  // host send across at once (the dp x tp ranks of a stage boundary on that host).
  bool send_across = false;
  int send_share = 1;
  int world_hosts = 1;  // hosts of the whole world (every step's statistics)
};

// `workers_per_host` <= 0: one machine (every group inside it).
HostPlacement PlaceOnHosts(const parallel::ParallelDims& dims, int workers_per_host);

// Megatron's rule: every tensor-parallel group inside one host (tp divides L, as blocks of tp
// adjacent ranks never straddle a boundary of L).
bool TpInsideHosts(const parallel::ParallelDims& dims, int workers_per_host);

}  // namespace lockstep::planner
