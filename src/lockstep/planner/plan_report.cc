// What becomes of the predictions: a candidate's row (PredictRow), Decide (what fits, what is
// fastest, what binds, whether one worker is faster), the table, the verdict and plan.json.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <tuple>

#include "lockstep/planner/planner.h"

namespace lockstep::planner {
namespace {

double Mib(int64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

// Exposed communication plus the pipeline's idle time, as a share of the step.
double OverheadShare(const Prediction& p) {
  return p.step_ms > 0 ? (p.comm_exposed_ms + p.bubble * p.pipeline_ms) / p.step_ms : 0;
}

std::string Describe(const PlanRow& r) {
  const Candidate& c = r.candidate;
  std::string s = c.layout() + " zero " + std::to_string(c.zero) + ", " + c.precision;
  if (c.recompute != "none") s += ", recompute " + c.recompute;
  if (c.dims.pp > 1)
    s += ", " + std::to_string(c.micros) + " micro-batches";
  else if (c.micros > 1)
    s += ", " + std::to_string(c.micros) + " accumulation steps";
  return s;
}

// Layouts predicted this close to the fastest are a tie: the plan's own figures move by more
// between plans (cnn-fashion dp=8 on 8 threads, ZeRO-2 against ZeRO-0 with one micro-batch:
// +0.3% in one plan, -2.8% in the next; trained, ZeRO-2 was 8-20% slower).
constexpr double kTie = 0.03;

// Among tied layouts the recommendation takes the one with the fewest collectives and the
// least extra work: the least model parallelism (tp x pp: data parallelism first, as Megatron's
// and DeepSpeed's guides advise), then the lowest ZeRO stage (ZeRO-2/3 reduce every
// micro-batch, and their measured cost is the noisiest figure of the profile on shared cores),
// then fewer micro-batches, then no recompute.
std::tuple<int, int, int, int> Complexity(const Candidate& c) {
  return {c.dims.tp * c.dims.pp, c.zero, c.micros, c.recompute == "none" ? 0 : 1};
}

}  // namespace

Result<PlanRow> PredictRow(const Candidate& c, const LayoutInput& in, const CommTable& comm, double units_per_step) {
  LS_ASSIGN_OR_RETURN(Prediction p, PredictLayout(in, comm));
  return PlanRow{c, p, false, p.step_ms > 0 ? units_per_step / (p.step_ms * 1e-3) : 0};
}

PlanResult Decide(int workers, bool tokens, int64_t mem_limit, int64_t one_worker_limit, std::vector<PlanRow> rows,
                  const std::vector<PlanRow>& one_worker) {
  PlanResult r;
  r.workers = workers;
  r.tokens = tokens;
  r.mem_limit = mem_limit;
  for (PlanRow& row : rows) row.fits = row.prediction.peak_bytes <= mem_limit;
  std::stable_sort(rows.begin(), rows.end(), [](const PlanRow& a, const PlanRow& b) {
    if (a.fits != b.fits) return a.fits;
    return a.prediction.step_ms < b.prediction.step_ms;
  });
  r.rows = std::move(rows);
  for (const PlanRow& o : one_worker)
    if (o.prediction.peak_bytes <= one_worker_limit &&
        (r.one_worker_step_ms == 0 || o.prediction.step_ms < r.one_worker_step_ms))
      r.one_worker_step_ms = o.prediction.step_ms;
  if (r.rows.empty() || !r.rows[0].fits) {
    r.binding = "memory";
    r.one_worker_faster = r.one_worker_step_ms > 0;
    return r;
  }
  // The simplest of the layouts tied with the fastest that fits goes to the top.
  // Not past one worker's step: a tie must not turn the verdict into "one worker is faster".
  const double fastest_fit = r.rows[0].prediction.step_ms;
  double tie = (1 + kTie) * fastest_fit;
  if (r.one_worker_step_ms >= fastest_fit) tie = std::min(tie, r.one_worker_step_ms);
  size_t pick = 0;
  for (size_t i = 1; i < r.rows.size() && r.rows[i].fits && r.rows[i].prediction.step_ms <= tie; ++i)
    if (Complexity(r.rows[i].candidate) < Complexity(r.rows[pick].candidate)) pick = i;
  std::rotate(r.rows.begin(), r.rows.begin() + static_cast<ptrdiff_t>(pick),
              r.rows.begin() + static_cast<ptrdiff_t>(pick) + 1);
  r.recommended = 0;
  const Prediction& best = r.rows[0].prediction;
  double fastest = best.step_ms;
  for (const PlanRow& row : r.rows) fastest = std::min(fastest, row.prediction.step_ms);
  // Memory binds when a layout that does not fit would be faster (by more than noise);
  // communication when exposed collectives and the pipeline bubble take a third of the step.
  if (fastest < 0.98 * fastest_fit)
    r.binding = "memory";
  else if (OverheadShare(best) >= 1.0 / 3.0)
    r.binding = "communication";
  else
    r.binding = "compute";
  r.one_worker_faster = workers > 1 && r.one_worker_step_ms > 0 && r.one_worker_step_ms < best.step_ms;
  return r;
}

nlohmann::ordered_json PlanResult::ToJson() const {
  nlohmann::ordered_json layouts = nlohmann::ordered_json::array();
  for (const PlanRow& row : rows) {
    const Candidate& c = row.candidate;
    const Prediction& p = row.prediction;
    nlohmann::ordered_json j = {{"layout", c.layout()},
                                {"zero", c.zero},
                                {"precision", c.precision},
                                {"recompute", c.recompute},
                                {"microbatches", c.micros},
                                {"fits", row.fits},
                                {"peak_bytes", p.peak_bytes},
                                {"step_ms", p.step_ms},
                                {tokens ? "tokens_per_s" : "samples_per_s", row.units_per_s},
                                {"comm_exposed_ms", p.comm_exposed_ms},
                                {"bubble", p.bubble},
                                {"comm_bytes", p.dp_bytes}};
    // Beyond the contract: rank 0's predicted memory row (what `train` writes) and the parts.
    const StageMemory& m0 = p.memory.at(0);
    j["rank0"] = {{"params_bytes", m0.params_bytes},
                  {"grads_bytes", m0.grads_bytes},
                  {"optimizer_bytes", m0.optimizer_bytes},
                  {"in_flight_bytes", m0.in_flight_bytes},
                  {"activation_bytes", m0.activation_bytes},
                  {"kernel_bytes", m0.kernel_bytes},
                  {"peak_bytes", m0.peak_bytes}};
    if (c.interleave > 1) j["interleave"] = c.interleave;
    j["micro_rows"] = c.micro_rows;
    j["compute_ms"] = p.compute_ms;
    j["optimizer_ms"] = p.optimizer_ms;
    layouts.push_back(j);
  }
  nlohmann::ordered_json out = {{"workers", workers},
                                {"binding", binding},
                                {"one_worker_faster", one_worker_faster},
                                {"recommended", recommended},
                                {"layouts", layouts}};
  out["mem_limit"] = mem_limit;
  out["one_worker_step_ms"] = one_worker_step_ms;
  return out;
}

void PrintPlan(const PlanResult& r, std::FILE* f) {
  std::fprintf(f, "%4s %-15s %4s %-9s %-9s %5s %4s %10s %9s %11s %6s %7s\n", "#", "layout", "zero", "precision",
               "recompute", "micro", "fits", "peak MiB", "step ms", r.tokens ? "tokens/s" : "samples/s", "comm%",
               "bubble%");
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const PlanRow& row = r.rows[i];
    const Prediction& p = row.prediction;
    const Candidate& c = row.candidate;
    std::fprintf(f, "%3zu%s %-15s %4d %-9s %-9s %5d %4s %10.1f %9.2f %11.0f %6.1f %7.1f\n", i + 1,
                 static_cast<int>(i) == r.recommended ? "*" : " ", c.layout().c_str(), c.zero, c.precision.c_str(),
                 c.recompute.c_str(), c.micros, row.fits ? "yes" : "no", Mib(p.peak_bytes), p.step_ms, row.units_per_s,
                 p.step_ms > 0 ? 100.0 * p.comm_exposed_ms / p.step_ms : 0.0, 100.0 * p.bubble);
  }
  std::fprintf(f, "\n");
  const char* unit = r.tokens ? "tokens/s" : "samples/s";
  if (r.recommended < 0) {
    std::fprintf(f,
                 "verdict: no layout of %d workers fits in %.1f MiB per worker (the smallest needs %.1f MiB); "
                 "memory binds: raise --mem-limit, add workers, or shrink the batch or the model.",
                 r.workers, Mib(r.mem_limit), r.rows.empty() ? 0.0 : Mib(r.rows.back().prediction.peak_bytes));
    if (r.one_worker_step_ms > 0) std::fprintf(f, " One worker with the whole machine's memory would fit.");
    std::fprintf(f, "\n");
    return;
  }
  const PlanRow& best = r.rows[static_cast<size_t>(r.recommended)];
  const Prediction& p = best.prediction;
  std::fprintf(f,
               "verdict: train %s (row 1): %.1f ms a step, %.0f %s, peak %.1f MiB of the %.1f MiB a worker may hold. "
               "What binds: %s (exposed communication %.0f%% of the step, pipeline bubble %.0f%%). ",
               Describe(best).c_str(), p.step_ms, best.units_per_s, unit, Mib(p.peak_bytes), Mib(r.mem_limit),
               r.binding.c_str(), p.step_ms > 0 ? 100.0 * p.comm_exposed_ms / p.step_ms : 0.0, 100.0 * p.bubble);
  if (r.workers > 1 && r.one_worker_step_ms > 0) {
    if (r.one_worker_faster)
      std::fprintf(f,
                   "One worker is faster: %.1f ms a step against %.1f ms with %d; distributing does not pay here, "
                   "train with --nproc 1.\n",
                   r.one_worker_step_ms, p.step_ms, r.workers);
    else
      std::fprintf(f, "One worker would take %.1f ms a step: %d workers are %.2fx faster.\n", r.one_worker_step_ms,
                   r.workers, r.one_worker_step_ms / p.step_ms);
  } else if (r.workers > 1) {
    std::fprintf(f, "One worker alone would not fit in memory.\n");
  } else {
    std::fprintf(f, "\n");
  }
}

Status WritePlanJson(const PlanResult& r, const std::string& path) {
  if (path.empty()) return Status::Ok();
  std::ofstream out(path);
  out << r.ToJson().dump(1) << "\n";
  if (!out) return Status::InvalidArgument("--json: cannot write '" + path + "'");
  return Status::Ok();
}

}  // namespace lockstep::planner
