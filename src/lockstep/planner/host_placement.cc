#include "lockstep/planner/host_placement.h"

#include <algorithm>
#include <map>
#include <set>

namespace lockstep::planner {

HostPlacement PlaceOnHosts(const parallel::ParallelDims& d, int workers_per_host) {
  HostPlacement p;
  const int world = d.world();
  if (workers_per_host <= 0 || workers_per_host >= world) {
    p.dp_per_host = {d.dp};
    return p;
  }
  const int l = workers_per_host;
  auto host = [&](int pp, int dp, int tp) { return d.RankOf({dp, tp, pp}) / l; };
  p.world_hosts = (world + l - 1) / l;
  // Every dp group (one per pp stage and tp index): its hosts and members on each.
  std::map<int, int> widest;
  std::map<int, std::set<std::pair<int, int>>> groups_on_host;  // host -> dp groups with members there
  for (int pp = 0; pp < d.pp; ++pp)
    for (int tp = 0; tp < d.tp; ++tp) {
      std::map<int, int> members;
      for (int dp = 0; dp < d.dp; ++dp) {
        const int h = host(pp, dp, tp);
        ++members[h];
        groups_on_host[h].insert({pp, tp});
      }
      if (members.size() > widest.size()) widest = members;
    }
  p.dp_hosts = static_cast<int>(widest.size());
  p.dp_per_host.clear();
  for (const auto& [h, n] : widest) p.dp_per_host.push_back(n);
  if (p.dp_hosts > 1)
    for (const auto& [h, g] : groups_on_host) p.dp_share = std::max(p.dp_share, static_cast<int>(g.size()));
  // Stage boundaries: rank r of stage s sends to the rank of stage s + 1 at the same (dp, tp).
  for (int pp = 0; pp + 1 < d.pp; ++pp) {
    std::map<int, int> across;  // sending host -> ranks sending across
    for (int dp = 0; dp < d.dp; ++dp)
      for (int tp = 0; tp < d.tp; ++tp)
        if (host(pp, dp, tp) != host(pp + 1, dp, tp)) ++across[host(pp, dp, tp)];
    for (const auto& [h, n] : across) {
      p.send_across = true;
      p.send_share = std::max(p.send_share, n);
    }
  }
  return p;
}

bool TpInsideHosts(const parallel::ParallelDims& d, int workers_per_host) {
  return workers_per_host <= 0 || workers_per_host % d.tp == 0;
}

}  // namespace lockstep::planner
