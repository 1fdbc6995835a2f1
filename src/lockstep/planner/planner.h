// `lockstep plan` (docs/planning.md): profile one worker (cached), predict every valid layout
// of N workers, decide which fit, which is fastest, what binds and whether one worker is
// faster, print the table and the verdict, and write plan.json.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/core/status.h"
#include "lockstep/planner/candidates.h"
#include "lockstep/planner/comm_curve.h"
#include "lockstep/planner/profile.h"
#include "lockstep/planner/step_model.h"

namespace lockstep::planner {

// `plan --hosts` (or --hostfile): the hosts the plan's workers span, and what the command
// found on them (cli/plan_command.cc asks each host). Empty (count 0): one machine.
struct PlanHosts {
  std::string spec;          // "h0:2,h1:2": the cache's key for the curves measured across them
  int count = 0;             // H
  int workers_per_host = 0;  // L (every host the same: one process a host)
  int cores = 0;             // cores of a host (the fewest any host has)
  // Every host runs on this machine's kernel (network namespaces: scripts/cluster.sh), so the
  // H x L workers share its cores, and the compute is profiled as that many workers here;
  // otherwise as the L workers of one host, on this machine (a host of the job, or its twin).
  bool share_cores = false;
};

struct PlanOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  int nproc = 1;
  std::string backend = "threads";
  int64_t mem_limit = 0;      // bytes per worker; 0: the machine's memory shared by the workers
  std::string hardware_path;  // a described machine instead of the measured profile
  std::string json_path;
  std::string out_dir;  // profile cache; empty: runs/<config name>
  bool fresh = false;   // measure everything again, replacing what the cache holds
  PlanHosts hosts;
};

// Measures the collectives a plan needs on options.backend: allreduce, reduce-scatter and
// all-gather for each group size in `groups`, and (send) a send between two ranks. Supplied by
// cli/, which owns bench-comm's measuring code.
using CommMeasurer = std::function<Result<CommTable>(const std::vector<int>& groups, bool send)>;

// A group placed across hosts: per_host[i] of its workers on host i (HostPlacement).
struct HostGroup {
  int group = 0;
  std::vector<int> per_host;
  bool operator<(const HostGroup& o) const { return std::tie(group, per_host) < std::tie(o.group, o.per_host); }
};
// Measures collectives across the plan's hosts (`plan --hosts`): allreduce, reduce-scatter and
// all-gather over each group as it is placed, and (send) a send from one host to another; the
// curves are Set with hosts = per_host.size() (2 for the send), at sizes up to max_bytes (the
// largest message the layouts send: a link is slow, and the curve grows past its last point at
// that point's bandwidth). Supplied by cli/ (bench-comm --hosts).
using HostsMeasurer =
    std::function<Result<CommTable>(const std::vector<HostGroup>& groups, bool send, int64_t max_bytes)>;

// One predicted layout.
struct PlanRow {
  Candidate candidate;
  Prediction prediction;
  bool fits = false;
  double units_per_s = 0;  // tokens (GPT) or samples per second, all workers together
};

struct PlanResult {
  int workers = 1;
  bool tokens = true;  // tokens_per_s (GPT) or samples_per_s
  int64_t mem_limit = 0;
  std::vector<PlanRow> rows;  // sorted: fitting rows by step time first, then the others
  int recommended = -1;       // index into rows; -1 when nothing fits
  std::string binding;        // "memory" | "compute" | "communication"
  bool one_worker_faster = false;
  double one_worker_step_ms = 0;  // the best one-worker layout that fits (0: none fits)
  nlohmann::ordered_json ToJson() const;
};

// Decides over the predicted rows: they fit in `mem_limit` bytes per worker; `one_worker` are
// the one-worker rows (empty if N = 1), which fit in `one_worker_limit`.
PlanResult Decide(int workers, bool tokens, int64_t mem_limit, int64_t one_worker_limit, std::vector<PlanRow> rows,
                  const std::vector<PlanRow>& one_worker);

// The candidate's pieces from the profile, composed into a LayoutInput.
Result<LayoutInput> BuildLayoutInput(const Candidate& c, const PlanSetup& s, const ComputeProfile& profile,
                                     const CommTable& comm);

// Rows of one replica's evaluation batch (eval.batch_size, default train.batch_size, over dp).
int64_t EvalRows(const Candidate& c, const PlanSetup& s);

// A candidate's row: `in`'s prediction (PredictLayout) and its throughput, `units_per_step`
// tokens or samples a step.
Result<PlanRow> PredictRow(const Candidate& c, const LayoutInput& in, const CommTable& comm, double units_per_step);

// Prints the table and the verdict.
void PrintPlan(const PlanResult& r, std::FILE* out);

// Writes plan.json (PlanResult::ToJson) to `path`; nothing when it is empty.
Status WritePlanJson(const PlanResult& r, const std::string& path);

// The line setting the ZeRO probe's plain pass (`probe_ms`: `piece` at `rows` rows, run by the
// plan's `nproc` workers at once as `backend` runs them, each pass ending when the slowest
// worker has, as a step does) against the profile's (`profile_ms`: the same workers' passes,
// lined up once a pass over every shape). On the threads backend a probe 15% or more slower
// adds a caution that the plan's step times may be that much low: there the workers' training
// steps slowed with the probe in every accuracy run (docs/planning.md, section 5); on MPI they
// did not.
std::string ProbeLine(int nproc, const std::string& backend, const std::string& piece, int64_t rows, double probe_ms,
                      double profile_ms);

// ZeRO-2 and ZeRO-3's cost (ns per micro-batch and parameter element) measured over the plan's
// workers as its backend runs them (MeasurePlanZero on every worker thread, or inside an mpirun
// job), at `rows`, as MeasureZeroOverRanks returns it.
using ZeroMeasurer = std::function<Result<ZeroProbe>(const std::vector<int64_t>& rows)>;

// `measure_zero` (more than one worker) replaces the profile's ZeRO figures; empty: they stay.
// With options.hosts, `measure` measures the groups inside one host (as L workers of it) and
// `measure_hosts` those across hosts; no ZeRO probe runs (the curves model ZeRO across hosts).
Status RunPlan(const PlanOptions& options, const CommMeasurer& measure, const ZeroMeasurer& measure_zero = {},
               const HostsMeasurer& measure_hosts = {});

// This rank's part of a ZeroMeasurer's job: every rank of `dp` (options.nproc of them) calls it
// with the same options and rows.
Result<ZeroProbe> MeasurePlanZero(const PlanOptions& options, const std::vector<int64_t>& rows,
                                  std::shared_ptr<comm::Communicator> dp);

}  // namespace lockstep::planner
