// `lockstep plan --hosts h0:L,h1:L,...` (or --hostfile): the hosts the plan's workers span. The
// command asks every host for its kernel and cores (this command again under mpirun, one
// process a host, with the internal --host-facts), so the planner knows whether the hosts share
// this machine's cores (the emulated cluster's network namespaces) or each has its own; and it
// measures the collectives that cross hosts as `lockstep bench-comm --hosts` does, one child
// process per group placement (planner/host_placement.h).
#pragma once

#include <string>
#include <vector>

#include "lockstep/cli/bench_comm_measure.h"
#include "lockstep/core/result.h"
#include "lockstep/planner/planner.h"
#include "lockstep/runtime/setup/hosts.h"

namespace lockstep::cli {

// bench-comm's collective as the planner's (a broadcast between two ranks: a send).
planner::CommOp ToCommOp(BenchOp op);

// bench-comm --json lines ({"op", "bytes", "time_us"}) into `table`: the curves of `group` on
// `hosts` hosts (a broadcast between two ranks: the send).
void AddBenchLines(const std::string& out, int group, int hosts, planner::CommTable* table);

// This host's facts as one JSON line on standard output ({"host", "boot_id", "cores"}): the
// process --host-facts runs on each host. 0.
int PrintHostFacts();

struct PlanHostsSetup {
  std::vector<runtime::Host> hosts;
  std::string interface;  // --mpi-if, or the one reaching the hosts
};

// Reads --hosts or --hostfile (one line each for a bad list, unequal slots, --nproc other than
// their slots), asks each host for its facts and fills options->hosts and options->nproc.
Result<PlanHostsSetup> ResolvePlanHosts(const std::string& hosts_flag, const std::string& hostfile,
                                        const std::string& mpi_interface, bool nproc_given, char* argv0,
                                        planner::PlanOptions* options);

// The curves of `groups` and (send) a send between two hosts, each a bench-comm --hosts child
// (hier with equal workers a host, else --backend mpi; `backend` mpi always mpi).
Result<planner::CommTable> MeasureAcrossHosts(const PlanHostsSetup& setup, const std::string& backend,
                                              const std::vector<planner::HostGroup>& groups, bool send,
                                              int64_t max_bytes);

}  // namespace lockstep::cli
