#include "lockstep/planner/planner.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "lockstep/core/clock.h"
#include "lockstep/core/version.h"
#include "lockstep/planner/hardware.h"
#include "lockstep/runtime/setup/config_keys.h"
#include "lockstep/runtime/setup/run_setup.h"

namespace lockstep::planner {
namespace {

// What a cached profile was measured for: the model's shape, the optimizer, this build and
// machine, and the profile's format (2: pieces carry kernel_bytes; 3: times scaled to whole
// passes; 8: the optimizer measured on every worker at once; 9: whole models' warm passes).
// Anything else (batch, layouts) only changes which shapes are needed.
std::string ModelKey(const PlanSetup& s) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  char model[256];
  if (s.gpt) {
    const nn::GptConfig& g = *s.gpt;
    std::snprintf(model, sizeof(model), "gpt vocab %lld context %lld layers %lld heads %lld width %lld mlp %lld",
                  static_cast<long long>(g.vocab), static_cast<long long>(g.context), static_cast<long long>(g.layers),
                  static_cast<long long>(g.heads), static_cast<long long>(g.width),
                  static_cast<long long>(g.mlp_ratio));
  } else {
    Result<std::string> kind = s.config.GetString("model.kind", "");
    std::snprintf(model, sizeof(model), "model %s", kind.ok() ? kind->c_str() : "");
  }
  char key[768];
  std::snprintf(key, sizeof(key), "lockstep %s profile 10 on %s, %s, optimizer %s", LOCKSTEP_VERSION, host, model,
                optim::OptimizerName(s.optim.kind));
  return key;
}

// The cache file: {"key", "compute": {"w<workers>-t<threads>": profile}, "comm": {"<backend>-<N>": table},
// "zero": {"<backend>-<N>": {"rows", "zero2", "zero3", "zero2_overlap", "zero3_overlap"}}} (the
// last: MeasureZeroOverRanks's figures over the plan's N workers).
nlohmann::json EmptyCache(const std::string& key) {
  return {{"key", key}, {"compute", nlohmann::json::object()}, {"comm", nlohmann::json::object()}};
}

nlohmann::json LoadCache(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  if (!in) return EmptyCache(key);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("key", "") != key || !j.contains("compute") || !j.contains("comm"))
    return EmptyCache(key);
  return j;
}

Status SaveCache(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(1) << "\n";
    if (!out) return Status::IoError("cannot write '" + tmp + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IoError("cannot rename '" + tmp + "': " + ec.message());
  return Status::Ok();
}

// The cache's compute slot of a profile: "w<workers>-t<threads>".
std::string ComputeSlot(int workers, int threads) {
  char slot[48];
  std::snprintf(slot, sizeof(slot), "w%d-t%d", workers, threads);
  return slot;
}

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

// A compute profile as the plan measured it: `fresh` when every shape in it was measured by this
// plan (none came from the cache), `check` the shape SecondLook measures again.
struct MeasuredProfile {
  ComputeProfile prof;
  bool fresh = false;
  ShapeKey check{0, 0};
};

Result<MeasuredProfile> Profile(const PlanSetup& s, const std::vector<Candidate>& cands, int workers, int threads,
                                nlohmann::json* cache, bool* measured) {
  const std::string slot = ComputeSlot(workers, threads);
  MeasuredProfile m;
  ComputeProfile& prof = m.prof;
  prof.workers = workers;
  prof.threads_per_worker = threads;
  if (cache->at("compute").contains(slot)) {
    Result<ComputeProfile> cached = ComputeProfile::FromJson(cache->at("compute").at(slot));
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
    (*cache)["compute"][slot] = prof.ToJson();
    *measured = true;
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

// The machine's speed moves for tens of seconds at a time (a shared VM), and a profile measured
// all at once can catch it slow as a whole: stop 33's accuracy runs had whole plans 15-75% over
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

Result<std::vector<PlanRow>> Predict(const std::vector<Candidate>& cands, const PlanSetup& s,
                                     const ComputeProfile& prof, const CommTable& comm) {
  std::vector<PlanRow> rows;
  const double batch_units = static_cast<double>(s.run.train.batch_size * s.units_per_row());
  for (const Candidate& c : cands) {
    LS_ASSIGN_OR_RETURN(LayoutInput in, BuildLayoutInput(c, s, prof, comm));
    LS_ASSIGN_OR_RETURN(Prediction p, PredictLayout(in, comm));
    PlanRow row{c, p, false, p.step_ms > 0 ? batch_units / (p.step_ms * 1e-3) : 0};
    rows.push_back(std::move(row));
  }
  return rows;
}

int64_t MachineMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{1} << 40;
}

// --hardware: the described machine; nothing is measured or cached.
Status RunHardwarePlan(const PlanOptions& o) {
  LS_ASSIGN_OR_RETURN(Config config, Config::LoadFile(o.config_path, o.overrides));
  LS_ASSIGN_OR_RETURN(ModelShape shape, ReadModelShape(config));
  LS_ASSIGN_OR_RETURN(int64_t batch, config.GetInt("train.batch_size", 16));
  if (batch < 1) return Status::InvalidArgument("train.batch_size must be at least 1");
  LS_RETURN_IF_ERROR(runtime::CheckConfigKeys(config).status());
  LS_ASSIGN_OR_RETURN(Hardware hw, ReadHardware(o.hardware_path));
  LS_ASSIGN_OR_RETURN(double clip, config.GetDouble("optim.grad_clip", 0.0));
  LS_ASSIGN_OR_RETURN(PlanResult r, PlanForHardware(hw, shape, batch, o.nproc, o.mem_limit, clip > 0));
  std::printf("%s, %.2fB parameters, %d devices of %s, global batch %lld x %lld tokens\n\n",
              shape.llama ? "llama" : "gpt", static_cast<double>(shape.TotalParams()) * 1e-9, o.nproc, hw.name.c_str(),
              static_cast<long long>(batch), static_cast<long long>(shape.context));
  // The table lists the best 40; plan.json has them all.
  PlanResult shown = r;
  if (shown.rows.size() > 40) shown.rows.resize(40);
  PrintPlan(shown, stdout);
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << r.ToJson().dump(1) << "\n";
    if (!out) return Status::InvalidArgument("--json: cannot write '" + o.json_path + "'");
  }
  return Status::Ok();
}

// train.threads, or the cores shared by the workers.
int WorkerThreads(const PlanSetup& s, int workers) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return s.run.train.threads > 0 ? static_cast<int>(s.run.train.threads) : std::max(1, cores / workers);
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

}  // namespace

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

Status RunPlan(const PlanOptions& o, const CommMeasurer& measure, const ZeroMeasurer& measure_zero) {
  if (o.nproc < 1) return Status::InvalidArgument("--nproc must be at least 1");
  if (o.mem_limit < 0) return Status::InvalidArgument("--mem-limit must not be negative");
  if (!o.hardware_path.empty()) return RunHardwarePlan(o);
  LS_ASSIGN_OR_RETURN(PlanSetup s, ReadPlanSetup(o.config_path, o.overrides, o.nproc));
  LS_ASSIGN_OR_RETURN(std::vector<Candidate> cands, EnumerateCandidates(s));
  std::vector<Candidate> ones;
  if (o.nproc > 1) {
    LS_ASSIGN_OR_RETURN(ones, OneWorkerCandidates(s));
  }

  const std::string out_dir =
      o.out_dir.empty() ? "runs/" + std::filesystem::path(o.config_path).stem().string() : o.out_dir;
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return Status::InvalidArgument("cannot create directory '" + out_dir + "': " + ec.message());
  const std::string cache_path = out_dir + "/plan-profile.json";
  nlohmann::json cache = o.fresh ? EmptyCache(ModelKey(s)) : LoadCache(cache_path, ModelKey(s));

  const int threads_n = WorkerThreads(s, o.nproc);
  const int threads_1 = WorkerThreads(s, 1);
  Stopwatch clock;
  bool measured = false;
  LS_ASSIGN_OR_RETURN(MeasuredProfile measured_n, Profile(s, cands, o.nproc, threads_n, &cache, &measured));
  MeasuredProfile measured_1;
  if (!ones.empty()) {
    LS_ASSIGN_OR_RETURN(measured_1, Profile(s, ones, 1, threads_1, &cache, &measured));
  }
  ComputeProfile& prof = measured_n.prof;
  const ComputeProfile& prof1 = measured_1.prof;

  std::set<int> groups;
  bool send = false;
  if (o.nproc > 1) groups.insert(o.nproc);  // every step's world collectives (step statistics, norm)
  for (const Candidate& c : cands) {
    if (c.dims.dp > 1) groups.insert(c.dims.dp);
    if (c.dims.tp > 1) groups.insert(c.dims.tp);
    send = send || c.dims.pp > 1;
  }
  const std::string comm_slot = o.backend + "-" + std::to_string(o.nproc);
  CommTable comm;
  bool have_comm = false;
  if (cache["comm"].contains(comm_slot)) {
    Result<CommTable> t = CommTable::FromJson(cache["comm"][comm_slot]);
    if (t.ok()) {
      comm = *t;
      have_comm = std::all_of(groups.begin(), groups.end(), [&](int g) { return comm.Has(CommOp::kAllreduce, g); }) &&
                  (!send || comm.Has(CommOp::kSend, 2));
    }
  }
  if (!have_comm && (!groups.empty() || send)) {
    LS_ASSIGN_OR_RETURN(comm, measure(std::vector<int>(groups.begin(), groups.end()), send));
    cache["comm"][comm_slot] = comm.ToJson();
    measured = true;
  }
  // Before the ZeRO figures go into the profile (the cache keeps the compute as measured).
  std::string second_look;
  for (MeasuredProfile* m : {&measured_n, &measured_1}) {
    if (!m->fresh) continue;
    LS_ASSIGN_OR_RETURN(double ratio, SecondLook(s, m));
    char line[160];
    std::snprintf(line, sizeof(line), "%s%d worker%s %.2fx%s", second_look.empty() ? "" : "; ", m->prof.workers,
                  m->prof.workers == 1 ? "" : "s", ratio, ratio < kSecondLookScales ? " (times scaled to it)" : "");
    second_look += line;
    cache["compute"][ComputeSlot(m->prof.workers, m->prof.threads_per_worker)] = m->prof.ToJson();
  }
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
    nlohmann::json& slot = cache["zero"][comm_slot];
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
      measured = true;
    }
    auto apply = [&](PieceCost& c) {
      for (int k = 0; k < 2; ++k) {
        c.zero_ns_per_element[k] = slot[kFields[k]].get<double>();
        c.zero_overlap_ns_per_element[k] = slot[kFields[2 + k]].get<double>();
      }
    };
    for (auto& [key, costs] : prof.gpt)
      if (key.second == 1) apply(costs.block);
    for (auto& [rows, cost] : prof.whole) apply(cost);
    const int64_t plain_rows = slot.value("plain_rows", int64_t{0});
    const ShapeKey plain_key{plain_rows, 1};
    if (plain_rows > 0 && prof.Has(plain_key, s.gpt.has_value())) {
      const double probe_ms = slot.value("plain_ms", 0.0), profile_ms = PassMs(prof.Main(plain_key, s.gpt.has_value()));
      if (probe_ms > 0 && profile_ms > 0)
        probe_line = ProbeLine(o.nproc, o.backend, s.gpt ? "a block" : "the model", plain_rows, probe_ms, profile_ms);
    }
  }
  if (measured) LS_RETURN_IF_ERROR(SaveCache(cache_path, cache));
  std::printf("profile: %s (%s; %d workers x %d threads)\n", measured ? "measured" : "cached", cache_path.c_str(),
              o.nproc, threads_n);
  if (!second_look.empty())
    std::printf("second look at the compute, after the collectives (times against the first look): %s\n",
                second_look.c_str());
  if (!probe_line.empty()) std::printf("%s\n", probe_line.c_str());
  if (measured) std::printf("profiled in %.1f s\n", clock.ElapsedSeconds());

  LS_ASSIGN_OR_RETURN(std::vector<PlanRow> rows, Predict(cands, s, prof, comm));
  std::vector<PlanRow> one_rows;
  if (!ones.empty()) {
    LS_ASSIGN_OR_RETURN(one_rows, Predict(ones, s, prof1, CommTable()));
  }
  const int64_t machine = MachineMemory();
  const int64_t limit = o.mem_limit > 0 ? o.mem_limit : machine / o.nproc;
  const int64_t one_limit = o.mem_limit > 0 ? o.mem_limit : machine;
  PlanResult r = Decide(o.nproc, s.gpt.has_value(), limit, one_limit, std::move(rows), one_rows);
  std::printf("%s, %d workers (%s backend), global batch %lld, memory limit %.1f MiB per worker (%s)\n\n",
              s.gpt ? "gpt" : "model", o.nproc, o.backend.c_str(), static_cast<long long>(s.run.train.batch_size),
              static_cast<double>(limit) / 1048576.0, o.mem_limit > 0 ? "--mem-limit" : "machine memory / workers");
  PrintPlan(r, stdout);
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << r.ToJson().dump(1) << "\n";
    if (!out) return Status::InvalidArgument("--json: cannot write '" + o.json_path + "'");
  }
  return Status::Ok();
}

}  // namespace lockstep::planner
