#include "lockstep/runtime/recovery/elastic_recovery.h"

#include <algorithm>
#include <cstdio>

#include "lockstep/runtime/recovery/host_probe.h"

namespace lockstep::runtime {
namespace {

// Growing probes only hosts that were gone; a short wait keeps the running job watched.
constexpr double kGrowProbeTimeoutS = 10;

}  // namespace

Result<ElasticRecovery> ElasticRecovery::Create(const TrainOptions& options, const Job& job) {
  ElasticRecovery e;
  e.options_ = e.current_ = options;
  if (options.min_nproc < 1 || options.min_nproc > options.nproc)
    return Status::InvalidArgument("--min-nproc " + std::to_string(options.min_nproc) + ": expected 1.." +
                                   std::to_string(options.nproc) + " (--nproc)");
  if (options.max_nproc != 0 && options.max_nproc < options.nproc)
    return Status::InvalidArgument("--max-nproc " + std::to_string(options.max_nproc) + " is below --nproc " +
                                   std::to_string(options.nproc));
  e.max_nproc_ = options.max_nproc;
  LS_ASSIGN_OR_RETURN(ElasticWorlds planner, ElasticWorlds::Create(options, job));
  // DiLoCo: a world that shrinks keeps replicas 0..dp-1 with their own parameters and inner
  // optimizer state; a replica that joins would have none (only the outer anchor is shared).
  if (options.max_nproc > 0 && planner.diloco())
    return Status::InvalidArgument("--max-nproc: a DiLoCo run (train.sync = \"diloco\") shrinks to the replicas "
                                   "left but does not grow: a new replica would have no inner state");
  e.planner_.emplace(std::move(planner));
  LS_ASSIGN_OR_RETURN(std::vector<Host> hosts, HostsOf(options));
  for (const Host& h : hosts) e.hosts_.push_back({h, 0});
  e.workers_ = options.nproc;
  if (!hosts.empty()) {
    if (TotalSlots(hosts) < options.nproc)
      return Status::InvalidArgument("--nproc " + std::to_string(options.nproc) + " is more than the " +
                                     std::to_string(TotalSlots(hosts)) + " slots of the hosts");
    e.current_.hosts = FormatHosts(hosts);
    e.current_.hostfile.clear();
    e.agent_ = LaunchAgent(comm::MpirunSetup::FromEnvironment());
  }
  return e;
}

int ElasticRecovery::Capacity() const {
  if (hosts_.empty()) return workers_;
  int n = 0;
  for (const HostState& h : hosts_) n += h.host.slots - h.lost;
  return n;
}

std::vector<Host> ElasticRecovery::LiveHosts() const {
  std::vector<Host> live;
  for (const HostState& h : hosts_)
    if (h.lost < h.host.slots) live.push_back({h.host.name, h.host.slots - h.lost});
  return live;
}

Result<std::optional<WorldChange>> ElasticRecovery::MoveTo(int capacity, const std::string& reason, bool growing) {
  const int cap = std::min(capacity, std::max(options_.nproc, max_nproc_));
  Result<ElasticWorld> next = planner_->Largest(cap, growing ? current_.nproc : options_.min_nproc);
  if (!next.ok()) {
    if (growing) return std::optional<WorldChange>();
    const int lost = std::max(options_.nproc, max_nproc_) - capacity;
    return Status::Unavailable("lost " + std::to_string(lost) + " of " +
                               std::to_string(std::max(options_.nproc, max_nproc_)) + " workers (" + reason + "); " +
                               next.status().message());
  }
  if (!hosts_.empty()) current_.hosts = FormatHosts(LiveHosts());
  if (next->nproc == current_.nproc) return std::optional<WorldChange>();
  WorldChange change{current_.nproc, next->nproc, reason};
  current_.nproc = next->nproc;
  current_.layout = next->layout.empty() ? options_.layout : next->layout;
  if (options_.layout.empty()) current_.layout.clear();
  attempt_ = growing ? Attempt::kGrown : Attempt::kFirstAtSize;
  return std::optional<WorldChange>(change);
}

Result<std::optional<WorldChange>> ElasticRecovery::AfterFailure(bool progressed, const std::string& cause) {
  std::string gone;
  for (HostState& h : hosts_) {
    if (h.lost == h.host.slots) continue;
    Status answer = ProbeHost(agent_, h.host.name, options_.heartbeat_timeout_s);
    if (answer.ok()) continue;
    h.lost = h.host.slots;
    gone += (gone.empty() ? "host " : ", host ") + h.host.name + " does not answer (" + answer.message() + ")";
  }
  if (!gone.empty()) return MoveTo(Capacity(), gone, false);
  if (progressed || attempt_ == Attempt::kFirstAtSize) {
    attempt_ = Attempt::kRetryAtSize;  // once: a transient failure costs a restart, not a worker
    return std::optional<WorldChange>();
  }
  const std::string reason = (attempt_ == Attempt::kGrown ? "the grown world failed before its first checkpoint: "
                                                          : "the restart failed again before a new checkpoint: ") +
                             cause;
  if (hosts_.empty()) {
    workers_ = std::min(workers_, current_.nproc) - 1;
  } else {
    // Ranks fill the hosts in order: the last host that holds ranks of this world gives a slot.
    int seen = 0;
    HostState* last = nullptr;
    for (HostState& h : hosts_) {
      if (h.lost == h.host.slots || seen >= current_.nproc) continue;
      seen += h.host.slots - h.lost;
      last = &h;
    }
    // hier: a host process runs all of its host's workers, so the host goes as a whole.
    if (last != nullptr) last->lost = options_.backend == "hier" ? last->host.slots : last->lost + 1;
  }
  Result<std::optional<WorldChange>> moved = MoveTo(Capacity(), reason, false);
  if (moved.ok() && !moved->has_value()) attempt_ = Attempt::kFirstAtSize;  // a spare took the place
  return moved;
}

std::string ElasticRecovery::LastStand() const {
  if (options_.min_nproc == options_.nproc) return "";  // asked for: no smaller world
  Result<ElasticWorld> next = planner_->Largest(options_.nproc - 1, options_.min_nproc);
  return next.ok() ? "" : next.status().message();
}

std::optional<WorldChange> ElasticRecovery::GrowAtCheckpoint(int64_t step) {
  if (!may_grow() || step >= planner_->total_steps()) return std::nullopt;
  std::string why;
  if (hosts_.empty()) {
    workers_ = max_nproc_;
    why = "up to --max-nproc " + std::to_string(max_nproc_) + " workers (on one machine they come back on probation)";
  } else {
    for (HostState& h : hosts_) {
      if (h.lost == 0) continue;
      if (!ProbeHost(agent_, h.host.name, std::min(kGrowProbeTimeoutS, options_.heartbeat_timeout_s)).ok()) continue;
      h.lost = 0;
      why += (why.empty() ? "host " : ", host ") + h.host.name + " answers again";
    }
    if (why.empty()) why = "free slots on the hosts";
  }
  Result<std::optional<WorldChange>> moved = MoveTo(Capacity(), why, true);
  return moved.ok() ? *moved : std::nullopt;
}

}  // namespace lockstep::runtime
