// RunPlan's measuring steps (plan_measure.h) and the ZeRO probe's job on each worker
// (MeasurePlanZero).
#include "lockstep/planner/plan_measure.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <thread>

#include "lockstep/planner/host_placement.h"

namespace lockstep::planner {
namespace {

ProfileRequest BaseRequest(const PlanSetup& s, int workers, int threads) {
  ProfileRequest req;
  req.config = s.config;
  req.gpt = s.gpt;
  req.optim = s.optim;
  req.workers = workers;
  req.threads_per_worker = threads;
  return req;
}

// A piece's forward + backward: what the second look and the probe line compare.
double PassMs(const PieceCost& c) { return c.fwd_ms + c.bwd_ms; }

// The machine's speed moves for tens of seconds at a time (a shared VM), and a profile measured
// all at once can catch it slow as a whole: the accuracy runs of docs/planning.md had whole plans 15-75% over
// every row's training time while a second plan, profiled after the training, was within 7%. So
// once the collectives are measured, tens of seconds later, one shape is measured again on the
// same line-up of workers; where that second look runs more than 3% faster, every compute time
// of the profile is scaled by the ratio (the faster look is kept: a slow spell only ever makes a
// look slower). Returns the ratio, second look over first.
constexpr double kSecondLookScales = 0.97;  // a ratio below this scales the profile
Result<double> SecondLook(const PlanSetup& s, MeasuredProfile* m) {
  ProfileRequest req = BaseRequest(s, m->prof.workers, m->prof.threads_per_worker);
  req.shapes = {m->check};
  req.zero = false;
  ComputeProfile again;
  LS_RETURN_IF_ERROR(MeasureCompute(req, &again));
  const bool gpt = s.gpt.has_value();
  const double before = PassMs(m->prof.Main(m->check, gpt)), after = PassMs(again.Main(m->check, gpt));
  const double ratio = before > 0 && after > 0 ? after / before : 1.0;
  if (ratio < kSecondLookScales) m->prof.ScaleTimes(ratio);
  return ratio;
}

// The micro-batch rows at which the layouts shard states over dp (ZeRO-2/3) with unsharded
// pieces (tp = 1): where a ZeRO figure is measured.
std::vector<int64_t> ZeroRows(const std::vector<Candidate>& cands, bool gpt) {
  std::vector<int64_t> rows;
  for (const Candidate& c : cands)
    if (c.zero >= 2 && c.dims.dp > 1 && (!gpt || c.dims.tp == 1) &&
        std::find(rows.begin(), rows.end(), c.micro_rows) == rows.end())
      rows.push_back(c.micro_rows);
  std::sort(rows.begin(), rows.end());
  return rows;
}

// The slot of the collectives and the ZeRO probe in the cache: "<backend>-<N>", or with hosts
// "<backend>-<hosts spec>".
std::string CommSlot(const PlanOptions& o) {
  return o.backend + "-" + (o.hosts.count > 0 ? o.hosts.spec : std::to_string(o.nproc));
}

}  // namespace

int WorkerThreads(const PlanSetup& s, int workers) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return s.run.train.threads > 0 ? static_cast<int>(s.run.train.threads) : std::max(1, cores / workers);
}

Result<MeasuredProfile> Profile(const PlanSetup& s, const std::vector<Candidate>& cands, int workers, int threads,
                                ProfileCache* cache) {
  const std::string slot = ComputeSlot(workers, threads);
  MeasuredProfile m;
  ComputeProfile& prof = m.prof;
  prof.workers = workers;
  prof.threads_per_worker = threads;
  if (cache->json.at("compute").contains(slot)) {
    Result<ComputeProfile> cached = ComputeProfile::FromJson(cache->json.at("compute").at(slot));
    if (cached.ok()) prof = *cached;
  }
  ProfileRequest req = BaseRequest(s, workers, threads);
  int64_t largest = 0;
  for (const Candidate& c : cands) {
    req.shapes.push_back({c.micro_rows, s.gpt ? c.dims.tp : 1});
    req.shapes.push_back({EvalRows(c, s), s.gpt ? c.dims.tp : 1});
    int64_t numel = 0;
    for (int64_t n : c.stages.front().param_numels) numel += n;
    largest = std::max(largest, numel);
  }
  req.optimizer_elements = std::min<int64_t>(largest, int64_t{1} << 22);
  const size_t before = prof.gpt.size() + prof.whole.size();
  const bool had_optimizer = prof.optimizer_ns_per_element > 0;
  LS_RETURN_IF_ERROR(MeasureCompute(req, &prof));
  if (prof.gpt.size() + prof.whole.size() != before || !had_optimizer) {
    cache->json["compute"][slot] = prof.ToJson();
    cache->changed = true;
  }
  m.fresh = before == 0 && !had_optimizer && !req.shapes.empty();
  if (m.fresh) {
    // The first candidate's training shape, at tp = 1 where one is listed (a cheaper line-up).
    m.check = req.shapes.front();
    for (const ShapeKey& k : req.shapes)
      if (k.second == 1) {
        m.check = k;
        break;
      }
  }
  return m;
}

Result<CommTable> MeasureCollectives(const PlanOptions& o, const PlanSetup& s, const std::vector<Candidate>& cands,
                                     const CommMeasurer& measure, const HostsMeasurer& measure_hosts,
                                     ProfileCache* cache) {
  // Inside one machine (or one host): group sizes; across hosts: groups as placed.
  std::set<int> groups;
  std::set<HostGroup> across;
  bool send = false, send_across = false;
  const int l = o.hosts.workers_per_host;
  if (o.nproc > 1) {  // every step's world collectives (step statistics, norm)
    if (o.hosts.count > 1)
      across.insert({o.nproc, std::vector<int>(static_cast<size_t>(o.hosts.count), l)});
    else
      groups.insert(o.nproc);
  }
  for (const Candidate& c : cands) {
    const HostPlacement h = PlaceOnHosts(c.dims, s.workers_per_host);
    if (c.dims.dp > 1) {
      if (h.dp_hosts > 1)
        across.insert({c.dims.dp, h.dp_per_host});
      else
        groups.insert(c.dims.dp);
    }
    if (c.dims.tp > 1) groups.insert(c.dims.tp);
    send = send || (c.dims.pp > 1 && !h.send_across);
    send_across = send_across || h.send_across;
  }
  const std::string comm_slot = CommSlot(o);
  nlohmann::json& cached = cache->json["comm"];
  CommTable comm;
  auto have = [&](const CommTable& t) {
    return std::all_of(groups.begin(), groups.end(), [&](int g) { return t.Has(CommOp::kAllreduce, g); }) &&
           std::all_of(across.begin(), across.end(),
                       [&](const HostGroup& g) {
                         return t.Has(CommOp::kAllreduce, g.group, static_cast<int>(g.per_host.size()));
                       }) &&
           (!send || t.Has(CommOp::kSend, 2)) && (!send_across || t.Has(CommOp::kSend, 2, 2));
  };
  if (cached.contains(comm_slot)) {
    Result<CommTable> t = CommTable::FromJson(cached[comm_slot]);
    if (t.ok() && have(*t)) return *t;
  }
  if (groups.empty() && across.empty() && !send && !send_across) return comm;  // one worker: nothing to measure
  if (!groups.empty() || send) {
    LS_ASSIGN_OR_RETURN(comm, measure(std::vector<int>(groups.begin(), groups.end()), send));
  }
  if (!across.empty() || send_across) {
    if (!measure_hosts) return Status::Internal("plan: no way to measure collectives across hosts");
    // Up to the largest gradient (a bucket or a whole DiLoCo fragment is no larger), from 1 MiB.
    int64_t largest = 1 << 20;
    for (const Candidate& c : cands)
      for (const StageLayout& st : c.stages) {
        int64_t numel = 0;
        for (int64_t n : st.param_numels) numel += n;
        while (largest < 4 * numel && largest < (int64_t{64} << 20)) largest *= 4;
      }
    LS_ASSIGN_OR_RETURN(CommTable t,
                        measure_hosts(std::vector<HostGroup>(across.begin(), across.end()), send_across, largest));
    comm.Merge(t);
  }
  cached[comm_slot] = comm.ToJson();
  cache->changed = true;
  return comm;
}

Result<std::string> TakeSecondLooks(const PlanSetup& s, const std::vector<MeasuredProfile*>& profiles,
                                    ProfileCache* cache) {
  std::string second_look;
  for (MeasuredProfile* m : profiles) {
    if (!m->fresh) continue;
    LS_ASSIGN_OR_RETURN(double ratio, SecondLook(s, m));
    char line[160];
    std::snprintf(line, sizeof(line), "%s%d worker%s %.2fx%s", second_look.empty() ? "" : "; ", m->prof.workers,
                  m->prof.workers == 1 ? "" : "s", ratio, ratio < kSecondLookScales ? " (times scaled to it)" : "");
    second_look += line;
    cache->json["compute"][ComputeSlot(m->prof.workers, m->prof.threads_per_worker)] = m->prof.ToJson();
  }
  return second_look;
}

Result<std::string> ApplyZeroProbe(const PlanOptions& o, const PlanSetup& s, const std::vector<Candidate>& cands,
                                   const ZeroMeasurer& measure_zero, ProfileCache* cache, ComputeProfile* prof) {
  // The ZeRO figures measured over the plan's workers as the backend runs them (threads: worker
  // threads; mpi: processes), with a step of one micro-batch and of kZeroOverlapMicros, in place
  // of the profile's one-micro-batch figures. mpi: each communicator's progress thread runs the
  // collectives beside the compute (cnn-fashion, 4 processes on 2 cores, ZeRO-2 rows trained
  // 15-40% slower than the profile's figure predicted); threads: a further micro-batch's
  // reduction costs more than the first's too (cnn-fashion, 8 threads, ZeRO-2 with 2
  // micro-batches trained 24% slower than predicted; within 2% with the step of four).
  const std::vector<int64_t> zero_rows = ZeroRows(cands, s.gpt.has_value());
  std::string probe_line;
  if (o.nproc > 1 && measure_zero && !zero_rows.empty()) {
    static const char* kFields[] = {"zero2", "zero3", "zero2_overlap", "zero3_overlap"};
    nlohmann::json& slot = cache->json["zero"][CommSlot(o)];
    bool have = slot.is_object() && slot.contains("rows");
    for (const char* f : kFields) have = have && slot.contains(f);
    for (int64_t n : zero_rows) {
      if (!have) break;
      const auto& cached = slot["rows"];
      have = std::find(cached.begin(), cached.end(), n) != cached.end();
    }
    if (!have) {
      LS_ASSIGN_OR_RETURN(ZeroProbe z, measure_zero(zero_rows));
      slot = {{"rows", zero_rows}, {"plain_rows", z.plain_rows}, {"plain_ms", z.plain_ms}};
      for (int i = 0; i < 4; ++i) slot[kFields[i]] = z.zero[static_cast<size_t>(i)];
      cache->changed = true;
    }
    auto apply = [&](PieceCost& c) {
      for (int k = 0; k < 2; ++k) {
        c.zero_ns_per_element[k] = slot[kFields[k]].get<double>();
        c.zero_overlap_ns_per_element[k] = slot[kFields[2 + k]].get<double>();
      }
    };
    for (auto& [key, costs] : prof->gpt)
      if (key.second == 1) apply(costs.block);
    for (auto& [rows, cost] : prof->whole) apply(cost);
    const int64_t plain_rows = slot.value("plain_rows", int64_t{0});
    const ShapeKey plain_key{plain_rows, 1};
    if (plain_rows > 0 && prof->Has(plain_key, s.gpt.has_value())) {
      const double probe_ms = slot.value("plain_ms", 0.0),
                   profile_ms = PassMs(prof->Main(plain_key, s.gpt.has_value()));
      if (probe_ms > 0 && profile_ms > 0)
        probe_line = ProbeLine(o.nproc, o.backend, s.gpt ? "a block" : "the model", plain_rows, probe_ms, profile_ms);
    }
  }
  return probe_line;
}

Result<ZeroProbe> MeasurePlanZero(const PlanOptions& o, const std::vector<int64_t>& rows,
                                  std::shared_ptr<comm::Communicator> dp) {
  LS_ASSIGN_OR_RETURN(PlanSetup s, ReadPlanSetup(o.config_path, o.overrides, o.nproc));
  ProfileRequest req = BaseRequest(s, o.nproc, WorkerThreads(s, o.nproc));
  // At least 11 passes (the profile's 7 gave cnn-fashion's 4-micro-batch ZeRO-2 figure 12-33 ns
  // an element over three plans; it is extrapolated to longer steps, so its noise multiplies).
  req.reps = 11;
  return MeasureZeroOverRanks(req, rows, std::move(dp));
}

std::string ProbeLine(int nproc, const std::string& backend, const std::string& piece, int64_t rows, double probe_ms,
                      double profile_ms) {
  const double ratio = probe_ms / profile_ms;
  char line[400];
  const int n =
      std::snprintf(line, sizeof(line),
                    "the ZeRO probe's plain pass over the %d %s, %s at %lld row%s: %.2f ms, %.2fx the profile's %.2f",
                    nproc, backend == "mpi" ? "processes" : "worker threads", piece.c_str(),
                    static_cast<long long>(rows), rows == 1 ? "" : "s", probe_ms, ratio, profile_ms);
  if (backend == "threads" && ratio >= 1.15 && n > 0 && n < static_cast<int>(sizeof(line)))
    std::snprintf(line + n, sizeof(line) - static_cast<size_t>(n),
                  "; the workers, each pass waiting for the slowest as a step does, ran slower than in the profile, so "
                  "the step times below may be up to %.0f%% low",
                  (1 - 1 / ratio) * 100);
  return line;
}

}  // namespace lockstep::planner
