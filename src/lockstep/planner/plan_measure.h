// The measuring steps of RunPlan (planner.cc), on this machine and the plan's backend: the compute
// profiles (what the cache lacks), the collectives, the second look at the compute, and the ZeRO
// probe over the plan's workers. Each reads the ProfileCache and puts what it measured there.
#pragma once

#include <string>
#include <vector>

#include "lockstep/planner/candidates.h"
#include "lockstep/planner/planner.h"
#include "lockstep/planner/profile.h"
#include "lockstep/planner/profile_cache.h"

namespace lockstep::planner {

// A compute profile as the plan measured it: `fresh` when every shape in it was measured by this
// plan (none came from the cache), `check` the shape SecondLook measures again.
struct MeasuredProfile {
  ComputeProfile prof;
  bool fresh = false;
  ShapeKey check{0, 0};
};

// train.threads, or the cores shared by the workers.
int WorkerThreads(const PlanSetup& s, int workers);

// The profile of `workers` workers of `threads` threads each at every shape the candidates need
// (their micro-batches and evaluation batches): the cached one, with what it lacks measured.
Result<MeasuredProfile> Profile(const PlanSetup& s, const std::vector<Candidate>& cands, int workers, int threads,
                                ProfileCache* cache);

// The curves of every collective the candidates issue (dp and tp groups, the world group for the
// step's end, a send between pipeline stages): cached for this backend and N, else `measure`d.
// With hosts: the groups inside a host from `measure`, those across hosts from `measure_hosts`.
Result<CommTable> MeasureCollectives(const PlanOptions& o, const PlanSetup& s, const std::vector<Candidate>& cands,
                                     const CommMeasurer& measure, const HostsMeasurer& measure_hosts,
                                     ProfileCache* cache);

// SecondLook at each fresh profile (its times scaled where the second look ran faster); the line
// RunPlan prints about them (empty when none was fresh).
Result<std::string> TakeSecondLooks(const PlanSetup& s, const std::vector<MeasuredProfile*>& profiles,
                                    ProfileCache* cache);

// The ZeRO figures measured over the plan's workers (`measure_zero`, or the cache) in place of
// the profile's, in `prof`. Returns the probe's line (ProbeLine; empty when there is none).
Result<std::string> ApplyZeroProbe(const PlanOptions& o, const PlanSetup& s, const std::vector<Candidate>& cands,
                                   const ZeroMeasurer& measure_zero, ProfileCache* cache, ComputeProfile* prof);

}  // namespace lockstep::planner
