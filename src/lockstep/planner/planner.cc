// RunPlan (planner.h) step by step: read the config and the layouts, open the cache, measure what
// it lacks (plan_measure.h), predict every layout (BuildLayoutInput, then PredictLayout: the one
// step model), decide, print and write plan.json. `--hardware` takes RunHardwarePlan instead.
#include "lockstep/planner/planner.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lockstep/core/clock.h"
#include "lockstep/planner/hardware.h"
#include "lockstep/planner/plan_measure.h"

namespace lockstep::planner {
namespace {

Status CheckOptions(const PlanOptions& o) {
  if (o.nproc < 1) return Status::InvalidArgument("--nproc must be at least 1");
  if (o.mem_limit < 0) return Status::InvalidArgument("--mem-limit must not be negative");
  return Status::Ok();
}

// The layouts of N workers, and (N > 1) those of one worker that the verdict weighs them against.
struct Layouts {
  std::vector<Candidate> n, one;
};
Result<Layouts> ReadLayouts(const PlanSetup& s, int nproc) {
  Layouts l;
  LS_ASSIGN_OR_RETURN(l.n, EnumerateCandidates(s));
  if (nproc > 1) {
    LS_ASSIGN_OR_RETURN(l.one, OneWorkerCandidates(s));
  }
  return l;
}

// The cache under --out (default runs/<config name>), created if missing.
Result<ProfileCache> OpenPlanCache(const PlanOptions& o, const PlanSetup& s) {
  const std::string out_dir =
      o.out_dir.empty() ? "runs/" + std::filesystem::path(o.config_path).stem().string() : o.out_dir;
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return Status::InvalidArgument("cannot create directory '" + out_dir + "': " + ec.message());
  return OpenCache(out_dir + "/plan-profile.json", ProfileKey(s), o.fresh);
}

// What the plan measured on this machine, or found in its cache.
struct Measurements {
  MeasuredProfile n, one;  // the profile of N workers, and of one (N > 1)
  CommTable comm;
  std::string second_look, probe_line;  // RunPlan's lines about them (empty: none)
};

// The workers profiled at once on this machine for the plan's N: all N, or with hosts that do not
// share this machine's cores one host's L (each host computes beside the others on its own).
int ProfiledWorkers(const PlanOptions& o) {
  return o.hosts.count > 0 && !o.hosts.share_cores ? o.hosts.workers_per_host : o.nproc;
}

// Compute threads a worker: train.threads, or as train gives them on the hosts (a host's cores
// over its workers, setup/hosts.h), or this machine's cores shared by the N workers.
int PlanThreads(const PlanOptions& o, const PlanSetup& s) {
  if (o.hosts.count > 0 && s.run.train.threads <= 0)
    return std::max(1, o.hosts.cores / std::max(1, o.hosts.workers_per_host));
  return WorkerThreads(s, o.nproc);
}

Result<Measurements> Measure(const PlanOptions& o, const PlanSetup& s, const Layouts& layouts,
                             const CommMeasurer& measure, const ZeroMeasurer& measure_zero,
                             const HostsMeasurer& measure_hosts, ProfileCache* cache) {
  Measurements m;
  LS_ASSIGN_OR_RETURN(m.n, Profile(s, layouts.n, ProfiledWorkers(o), PlanThreads(o, s), cache));
  if (!layouts.one.empty()) {
    LS_ASSIGN_OR_RETURN(m.one, Profile(s, layouts.one, 1, WorkerThreads(s, 1), cache));
  }
  LS_ASSIGN_OR_RETURN(m.comm, MeasureCollectives(o, s, layouts.n, measure, measure_hosts, cache));
  // Before the ZeRO figures go into the profile (the cache keeps the compute as measured).
  LS_ASSIGN_OR_RETURN(m.second_look, TakeSecondLooks(s, {&m.n, &m.one}, cache));
  if (o.hosts.count == 0) {  // across hosts the curves model ZeRO (step_model.cc)
    LS_ASSIGN_OR_RETURN(m.probe_line, ApplyZeroProbe(o, s, layouts.n, measure_zero, cache, &m.n.prof));
  }
  return m;
}

void PrintMeasurements(const PlanOptions& o, const PlanSetup& s, const ProfileCache& cache, const Measurements& m,
                       const Stopwatch& clock) {
  std::printf("profile: %s (%s; %d workers x %d threads)\n", cache.changed ? "measured" : "cached", cache.path.c_str(),
              ProfiledWorkers(o), PlanThreads(o, s));
  if (o.hosts.count > 0)
    std::printf("hosts: %s, %d cores each; %s\n", o.hosts.spec.c_str(), o.hosts.cores,
                o.hosts.share_cores
                    ? "they run on this machine's kernel (network namespaces), so all their workers share its cores "
                      "and were profiled together here"
                    : "the compute was profiled as one host's workers on this machine (run plan on a host of the job)");
  if (!m.second_look.empty())
    std::printf("second look at the compute, after the collectives (times against the first look): %s\n",
                m.second_look.c_str());
  if (!m.probe_line.empty()) std::printf("%s\n", m.probe_line.c_str());
  if (cache.changed) std::printf("profiled in %.1f s\n", clock.ElapsedSeconds());
}

// Every candidate's prediction from the profile: its LayoutInput, then the one step model.
Result<std::vector<PlanRow>> Predict(const std::vector<Candidate>& cands, const PlanSetup& s,
                                     const ComputeProfile& prof, const CommTable& comm) {
  std::vector<PlanRow> rows;
  const double batch_units = static_cast<double>(s.run.train.batch_size * s.units_per_row());
  for (const Candidate& c : cands) {
    LS_ASSIGN_OR_RETURN(LayoutInput in, BuildLayoutInput(c, s, prof, comm));
    LS_ASSIGN_OR_RETURN(PlanRow row, PredictRow(c, in, comm, batch_units));
    rows.push_back(std::move(row));
  }
  return rows;
}

int64_t MachineMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{1} << 40;
}

// The rows of N workers and of one, decided within the memory each worker may hold.
Result<PlanResult> PredictAndDecide(const PlanOptions& o, const PlanSetup& s, const Layouts& layouts,
                                    const Measurements& m) {
  LS_ASSIGN_OR_RETURN(std::vector<PlanRow> rows, Predict(layouts.n, s, m.n.prof, m.comm));
  std::vector<PlanRow> one_rows;
  if (!layouts.one.empty()) {
    LS_ASSIGN_OR_RETURN(one_rows, Predict(layouts.one, s, m.one.prof, CommTable()));
  }
  const int64_t machine = MachineMemory();
  const int64_t limit = o.mem_limit > 0 ? o.mem_limit : machine / ProfiledWorkers(o);
  const int64_t one_limit = o.mem_limit > 0 ? o.mem_limit : machine;
  return Decide(o.nproc, s.gpt.has_value(), limit, one_limit, std::move(rows), one_rows);
}

}  // namespace

Status RunPlan(const PlanOptions& o, const CommMeasurer& measure, const ZeroMeasurer& measure_zero,
               const HostsMeasurer& measure_hosts) {
  LS_RETURN_IF_ERROR(CheckOptions(o));
  if (!o.hardware_path.empty()) return RunHardwarePlan(o);
  LS_ASSIGN_OR_RETURN(PlanSetup s, ReadPlanSetup(o.config_path, o.overrides, o.nproc));
  if (o.hosts.count > 0) s.workers_per_host = o.hosts.workers_per_host;
  LS_ASSIGN_OR_RETURN(Layouts layouts, ReadLayouts(s, o.nproc));
  LS_ASSIGN_OR_RETURN(ProfileCache cache, OpenPlanCache(o, s));
  Stopwatch clock;
  LS_ASSIGN_OR_RETURN(Measurements m, Measure(o, s, layouts, measure, measure_zero, measure_hosts, &cache));
  if (cache.changed) LS_RETURN_IF_ERROR(SaveCache(cache));
  PrintMeasurements(o, s, cache, m, clock);
  LS_ASSIGN_OR_RETURN(PlanResult r, PredictAndDecide(o, s, layouts, m));
  const std::string backend = o.hosts.count > 0 && o.backend == "threads" ? "hier" : o.backend;
  std::printf("%s, %d workers%s (%s backend), global batch %lld, memory limit %.1f MiB per worker (%s)\n\n",
              s.gpt ? "gpt" : "model", o.nproc,
              o.hosts.count > 0 ? (" on " + std::to_string(o.hosts.count) + " hosts").c_str() : "", backend.c_str(),
              static_cast<long long>(s.run.train.batch_size),
              static_cast<double>(r.mem_limit) / 1048576.0,
              o.mem_limit > 0                                 ? "--mem-limit"
              : o.hosts.count > 0 && !o.hosts.share_cores ? "this machine's memory / a host's workers"
                                                           : "machine memory / workers");
  PrintPlan(r, stdout);
  return WritePlanJson(r, o.json_path);
}

}  // namespace lockstep::planner
