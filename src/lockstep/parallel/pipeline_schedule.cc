#include "lockstep/parallel/pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace lockstep::parallel {
namespace {

using Kind = PipeOp::Kind;

PipeOp F(int i) { return {Kind::kForward, i}; }
PipeOp B(int i) { return {Kind::kBackward, i}; }

std::string Str(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

Status CheckTime(const char* what, int index, double t) {
  if (std::isfinite(t) && t >= 0) return Status::Ok();
  return Status::InvalidArgument(std::string("SimulatePipeline: ") + what + "[" + std::to_string(index) +
                                 "] = " + Str(t) + "; times must be finite and >= 0");
}

// Each stage's list must be a permutation of {F0..F(m-1), B0..B(m-1)}: a missing or
// repeated op is a malformed input, not a deadlock, and gets its own message.
Status CheckOps(const std::vector<std::vector<PipeOp>>& stage_ops, int micros) {
  for (size_t s = 0; s < stage_ops.size(); ++s) {
    std::string where = "SimulatePipeline: stage " + std::to_string(s) + "'s ops ";
    std::vector<int> seen(2 * static_cast<size_t>(micros), 0);
    for (const PipeOp& op : stage_ops[s]) {
      if (op.micro < 0 || op.micro >= micros)
        return Status::InvalidArgument(where + "name micro-batch " + std::to_string(op.micro) + ", outside 0.." +
                                       std::to_string(micros - 1));
      if (++seen[2 * op.micro + (op.kind == Kind::kBackward)] > 1)
        return Status::InvalidArgument(where + "hold " + PipeOpName(op) + " twice");
    }
    for (int i = 0; i < 2 * micros; ++i)
      if (!seen[i]) return Status::InvalidArgument(where + "lack " + PipeOpName(i % 2 ? B(i / 2) : F(i / 2)));
  }
  return Status::Ok();
}

}  // namespace

Result<PipeSchedule> ParsePipeSchedule(const std::string& name) {
  if (name == "gpipe") return PipeSchedule::kGPipe;
  if (name == "1f1b") return PipeSchedule::k1F1B;
  return Status::InvalidArgument("train.pp_schedule: '" + name + "' is not one of gpipe, 1f1b");
}

const char* PipeScheduleName(PipeSchedule s) { return s == PipeSchedule::kGPipe ? "gpipe" : "1f1b"; }

std::string PipeOpName(const PipeOp& op) {
  std::string name(1, op.kind == Kind::kForward ? 'F' : 'B');
  return name + std::to_string(op.micro);
}

std::vector<PipeOp> StageSchedule(PipeSchedule schedule, int stages, int stage, int micros) {
  std::vector<PipeOp> ops;
  if (stages < 1 || stage < 0 || stage >= stages || micros < 1) return ops;
  ops.reserve(2 * static_cast<size_t>(micros));
  if (schedule == PipeSchedule::kGPipe) {
    for (int i = 0; i < micros; ++i) ops.push_back(F(i));
    for (int i = 0; i < micros; ++i) ops.push_back(B(i));
    return ops;
  }
  // Stage s can only start B0 once F0 has gone down the remaining stages-s-1 stages and
  // come back, so it fills that wait with forwards; after that each backward frees the
  // activations the next forward needs.
  int warmup = std::min(stages - stage - 1, micros);
  for (int i = 0; i < warmup; ++i) ops.push_back(F(i));
  for (int i = 0; i < micros - warmup; ++i) {
    ops.push_back(F(warmup + i));
    ops.push_back(B(i));
  }
  for (int i = micros - warmup; i < micros; ++i) ops.push_back(B(i));
  return ops;
}

int MaxInFlight(PipeSchedule schedule, int stages, int stage, int micros) {
  if (stages < 1 || stage < 0 || stage >= stages || micros < 1) return 0;
  return schedule == PipeSchedule::kGPipe ? micros : std::min(stages - stage, micros);
}

double BubbleFormula(int stages, int micros) {
  if (stages < 1 || micros < 1) return 0;
  return static_cast<double>(stages - 1) / static_cast<double>(micros + stages - 1);
}

size_t PipeOpSlot(const PipeOp& op) { return 2 * static_cast<size_t>(op.micro) + (op.kind == Kind::kBackward); }

double PipeOpReadyAt(const std::vector<std::vector<double>>& done, int s, const PipeOp& op, double comm) {
  const int stages = static_cast<int>(done.size());
  if (op.kind == Kind::kBackward) {
    // Needs its own forward and, below the last stage, the gradient from above.
    const double own = done[s][PipeOpSlot(F(op.micro))];
    if (own < 0) return -1;
    if (s + 1 == stages) return own;
    const double above = done[s + 1][PipeOpSlot(op)];
    return above < 0 ? -1 : std::max(own, above + comm);
  }
  if (s == 0) return 0;
  const double below = done[s - 1][PipeOpSlot(op)];
  return below < 0 ? -1 : below + comm;
}

Result<PipeSimulation> SimulatePipeline(PipeSchedule schedule, int micros, const std::vector<double>& forward_time,
                                        const std::vector<double>& backward_time, double comm) {
  int stages = static_cast<int>(forward_time.size());
  std::vector<std::vector<PipeOp>> ops;
  for (int s = 0; s < stages; ++s) ops.push_back(StageSchedule(schedule, stages, s, micros));
  return SimulatePipeline(ops, micros, forward_time, backward_time, comm);
}

Result<PipeSimulation> SimulatePipeline(const std::vector<std::vector<PipeOp>>& stage_ops, int micros,
                                        const std::vector<double>& forward_time,
                                        const std::vector<double>& backward_time, double comm) {
  const int stages = static_cast<int>(stage_ops.size());
  if (micros < 1)
    return Status::InvalidArgument("SimulatePipeline: micros = " + std::to_string(micros) + "; need >= 1");
  if (stages < 1) return Status::InvalidArgument("SimulatePipeline: no stages");
  if (forward_time.size() != stage_ops.size() || backward_time.size() != stage_ops.size())
    return Status::InvalidArgument("SimulatePipeline: " + std::to_string(stages) + " stages but " +
                                   std::to_string(forward_time.size()) + " forward and " +
                                   std::to_string(backward_time.size()) + " backward times");
  for (int s = 0; s < stages; ++s) {
    LS_RETURN_IF_ERROR(CheckTime("forward_time", s, forward_time[s]));
    LS_RETURN_IF_ERROR(CheckTime("backward_time", s, backward_time[s]));
  }
  if (!std::isfinite(comm) || comm < 0)
    return Status::InvalidArgument("SimulatePipeline: comm = " + Str(comm) + "; must be finite and >= 0");
  LS_RETURN_IF_ERROR(CheckOps(stage_ops, micros));

  // done[s][2*i + kind]: finish time of that op, or -1 while it has not run. Every op's
  // start is a function of finish times only, so sweeping the stages round-robin until
  // nothing moves gives the same times as a priority-queue simulation, and "nothing
  // moves yet some stage has ops left" is exactly a deadlock.
  constexpr double kNotRun = -1;
  std::vector<std::vector<double>> done(stages, std::vector<double>(2 * static_cast<size_t>(micros), kNotRun));
  auto finish = [&](int s, const PipeOp& op) { return done[s][PipeOpSlot(op)]; };

  PipeSimulation sim;
  sim.spans.resize(stages);
  std::vector<size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < stages; ++s) {
      while (next[s] < stage_ops[s].size()) {
        const PipeOp& op = stage_ops[s][next[s]];
        const double ready = PipeOpReadyAt(done, s, op, comm);
        if (ready < 0) break;
        double start = std::max(free_at[s], ready);
        double end = start + (op.kind == Kind::kForward ? forward_time[s] : backward_time[s]);
        done[s][PipeOpSlot(op)] = end;
        free_at[s] = end;
        sim.spans[s].push_back({op, start, end});
        ++next[s];
        moved = true;
      }
    }
  }

  std::string stuck;
  for (int s = 0; s < stages; ++s) {
    if (next[s] == stage_ops[s].size()) continue;
    const PipeOp& op = stage_ops[s][next[s]];
    // Stage 0's forwards and the last stage's backwards (once their forward ran) never
    // wait on another stage, so a stuck op's missing input is one of these three.
    std::string missing;
    if (op.kind == Kind::kForward)
      missing = PipeOpName(op) + " of stage " + std::to_string(s - 1);
    else if (finish(s, F(op.micro)) == kNotRun)
      missing = PipeOpName(F(op.micro)) + " (later in its own order)";
    else
      missing = PipeOpName(op) + " of stage " + std::to_string(s + 1);
    stuck += std::string(stuck.empty() ? "" : ", ") + "stage " + std::to_string(s) + " at " + PipeOpName(op) +
             " waits for " + missing;
  }
  if (!stuck.empty()) return Status::Internal("pipeline schedule deadlocks: " + stuck);

  for (int s = 0; s < stages; ++s) {
    sim.busy.push_back(micros * (forward_time[s] + backward_time[s]));
    sim.makespan = std::max(sim.makespan, free_at[s]);
  }
  for (int s = 0; s < stages; ++s) {
    sim.bubble.push_back(sim.makespan > 0 ? 1 - sim.busy[s] / sim.makespan : 0);
    sim.mean_bubble += sim.bubble[s] / stages;
  }
  return sim;
}

Result<StagePartition> BalanceStages(const std::vector<double>& layer_cost, double first_extra, double last_extra,
                                     int stages) {
  const int layers = static_cast<int>(layer_cost.size());
  const std::string pp = "--layout pp=" + std::to_string(stages) + ": ";
  if (stages < 1) return Status::InvalidArgument(pp + "a pipeline needs at least one stage (use pp >= 1)");
  if (layers == 0) return Status::InvalidArgument(pp + "the model has no layers to place on pipeline stages");
  if (stages > layers)
    return Status::InvalidArgument(
        pp + "the model has " + std::to_string(layers) + (layers == 1 ? " layer" : " layers") +
        "; each pipeline stage needs at least one (use pp <= " + std::to_string(layers) + ")");
  for (int i = 0; i < layers; ++i)
    if (!std::isfinite(layer_cost[i]) || layer_cost[i] < 0)
      return Status::InvalidArgument("BalanceStages: layer " + std::to_string(i) + " has cost " + Str(layer_cost[i]) +
                                     "; costs must be finite and >= 0");
  if (!std::isfinite(first_extra) || first_extra < 0 || !std::isfinite(last_extra) || last_extra < 0)
    return Status::InvalidArgument("BalanceStages: extras " + Str(first_extra) + " and " + Str(last_extra) +
                                   " must be finite and >= 0");

  std::vector<double> prefix(layers + 1, 0);
  for (int i = 0; i < layers; ++i) prefix[i + 1] = prefix[i] + layer_cost[i];
  // Every comparison below is between values computed by this one function, so the
  // optimum the DP finds is met exactly (no epsilon) when the partition is rebuilt.
  auto stage_cost = [&](int b, int e, int s) {
    return (prefix[e] - prefix[b]) + (s == 0 ? first_extra : 0) + (s == stages - 1 ? last_extra : 0);
  };
  // best[k][i]: least possible maximum cost of the last k stages (stages-k .. stages-1)
  // holding layers [i, layers); infinite where fewer than k layers remain.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(layers + 1, kInf));
  best[0][layers] = 0;
  for (int k = 1; k <= stages; ++k) {
    int s = stages - k;
    for (int i = s; i <= layers - k; ++i)
      for (int e = i + 1; e <= layers - (k - 1); ++e)
        best[k][i] = std::min(best[k][i], std::max(stage_cost(i, e, s), best[k - 1][e]));
  }
  const double optimum = best[stages][0];

  // Rebuild front to back, each stage ending at the first boundary that keeps the optimum
  // reachable: the earliest-boundaries tie rule of the header.
  StagePartition p;
  p.first_extra = first_extra;
  p.last_extra = last_extra;
  p.begin.push_back(0);
  for (int s = 0; s < stages; ++s) {
    int b = p.begin.back(), k = stages - s;
    int e = b + 1;
    while (e < layers - (k - 1) && std::max(stage_cost(b, e, s), best[k - 1][e]) > optimum) ++e;
    if (s == stages - 1) e = layers;
    p.begin.push_back(e);
    p.cost.push_back(stage_cost(b, e, s));
  }
  double total = std::accumulate(p.cost.begin(), p.cost.end(), 0.0);
  double max_cost = *std::max_element(p.cost.begin(), p.cost.end());
  p.imbalance = total > 0 ? max_cost / (total / stages) - 1 : 0;
  return p;
}

std::string DescribePartition(const StagePartition& p) {
  const int stages = static_cast<int>(p.cost.size());
  if (stages == 0 || p.begin.size() != p.cost.size() + 1) return "empty partition";
  double total = std::accumulate(p.cost.begin(), p.cost.end(), 0.0);
  auto percent = [](double share) { return std::to_string(std::lround(100 * share)) + "%"; };
  std::string out;
  for (int s = 0; s < stages; ++s) {
    int first = p.begin[s], last = p.begin[s + 1] - 1;
    out += (s ? ", stage " : "stage ") + std::to_string(s) + ": ";
    out += first == last ? "layer " + std::to_string(first)
                         : "layers " + std::to_string(first) + "-" + std::to_string(last);
    if (s == 0 && p.first_extra > 0) out += " + embeddings";
    if (s == stages - 1 && p.last_extra > 0) out += " + head";
    out += std::string(s ? " (" : " (cost ") + percent(total > 0 ? p.cost[s] / total : 0) + ")";
  }
  return out + "; expected imbalance " + percent(p.imbalance);
}

}  // namespace lockstep::parallel
