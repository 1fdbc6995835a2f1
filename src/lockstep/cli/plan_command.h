// `lockstep plan` on the command line (planner/planner.h does the planning). The
// collectives a plan needs are measured here with bench-comm's code: in this process for the
// threads backend, as `lockstep bench-comm --backend mpi --json` under mpirun for mpi; for mpi
// also ZeRO's cost over the ranks as processes, by this command relaunched under mpirun with
// the internal --zero-probe. With --hosts (or --hostfile) the collectives across hosts are
// measured as `lockstep bench-comm --hosts` measures them, after this command, run once on every
// host under mpirun with the internal --host-facts, has told each host's kernel and cores.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "lockstep/planner/planner.h"

namespace lockstep::cli {

struct PlanCommand {
  planner::PlanOptions options;
  std::string mem_limit;   // K/M/G suffixes
  std::string zero_probe;  // internal: rows for MeasurePlanZero, inside the mpirun job of an mpi plan
  std::string hosts, hostfile, mpi_interface;  // --hosts, --hostfile, --mpi-if
  bool host_facts = false;  // internal: this host's kernel and cores, one JSON line (ReadHostFacts)
  CLI::App* app = nullptr;
};

// Adds the `plan` subcommand to `app`; its flags land in `cmd`.
void AddPlanCommand(CLI::App& app, PlanCommand* cmd);

// After parsing, when cmd.app->parsed(): runs the plan; the exit status (2: bad input).
int RunPlanCommand(PlanCommand& cmd, int argc, char** argv);

}  // namespace lockstep::cli
