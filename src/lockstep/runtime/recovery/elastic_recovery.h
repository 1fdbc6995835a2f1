// Elastic recovery (`--min-nproc M [--max-nproc X]` with --max-restarts): the supervisor's
// bookkeeping of how many workers a run still has and which world its next attempt gets.
//
// After a failed attempt:
//  - hosts (--hosts/--hostfile, MPI) are probed with mpirun's own launch agent; a host that
//    does not answer within --heartbeat-timeout is left out at once;
//  - otherwise the failure counts as transient once: the next attempt keeps the world size.
//    When that restart fails too before a new checkpoint commits (or a world that had just
//    grown fails before its first checkpoint), one worker is taken to be lost for good:
//    threads and single-machine MPI count workers, with hosts a slot of the last host goes
//    (with --backend hier the whole host: its one process runs all of the host's workers);
//  - the next world is the largest one in [M, workers left] the run's plan accepts
//    (setup/elastic_worlds.h; with --backend hier, whole hosts). None: kUnavailable, naming the lost capacity.
// At a checkpoint commit, with --max-nproc above the current world, the world grows as far as
// capacity allows (without hosts: up to --max-nproc, lost workers come back on probation;
// with hosts: the hosts that answer a probe again and free slots) and the job restarts from
// that checkpoint in the larger world. A grown world that fails before its first checkpoint
// shrinks again at once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/runtime/setup/elastic_worlds.h"
#include "lockstep/runtime/setup/hosts.h"
#include "lockstep/train_options.h"

namespace lockstep::runtime {

struct WorldChange {
  int from = 0, to = 0;
  std::string reason;
};

class ElasticRecovery {
 public:
  // InvalidArgument for --min-nproc/--max-nproc that do not fit --nproc, or bad hosts.
  static Result<ElasticRecovery> Create(const TrainOptions& options, const Job& job = BuiltinJob());

  // The options of the next attempt: nproc, layout and hosts of the current world.
  const TrainOptions& current() const { return current_; }

  // After a failed attempt; `progressed`: it committed a checkpoint. nullopt: same world again.
  Result<std::optional<WorldChange>> AfterFailure(bool progressed, const std::string& cause);

  // After an attempt committed the checkpoint of `step`: a larger world when capacity came
  // back (never at the run's last step: that attempt is finishing).
  std::optional<WorldChange> GrowAtCheckpoint(int64_t step);
  bool may_grow() const { return max_nproc_ > current_.nproc; }
  bool diloco() const { return planner_->diloco(); }

  // Why losing one worker would end the run although --min-nproc is below --nproc ("" when a
  // smaller world exists), said up front.
  std::string LastStand() const;

 private:
  struct HostState {
    Host host;
    int lost = 0;  // slots taken away (the host is gone when lost == slots)
  };
  enum class Attempt { kFirstAtSize, kRetryAtSize, kGrown };

  int Capacity() const;
  std::vector<Host> LiveHosts() const;
  Result<std::optional<WorldChange>> MoveTo(int capacity, const std::string& reason, bool growing);

  TrainOptions options_, current_;
  std::optional<ElasticWorlds> planner_;
  int workers_ = 0;  // without hosts: workers left
  std::vector<HostState> hosts_;
  int max_nproc_ = 0;
  Attempt attempt_ = Attempt::kFirstAtSize;
  std::string agent_;
};

}  // namespace lockstep::runtime
