// Pipeline-parallel planning (pure: no communication, no tensors). Which compute ops each
// stage runs in which order (GPipe or 1F1B), how many micro-batches' activations a stage
// holds at once, what bubble a schedule leaves (closed form and an event-driven
// simulation that also catches deadlocking orders), and how to split the transformer
// blocks over the stages. The pipeline executor runs exactly what StageSchedule says.
#pragma once

#include <string>
#include <vector>

#include "lockstep/core/result.h"

namespace lockstep::parallel {

enum class PipeSchedule { kGPipe, k1F1B };

// "gpipe" | "1f1b" (exact spelling). InvalidArgument:
// "train.pp_schedule: 'x' is not one of gpipe, 1f1b".
Result<PipeSchedule> ParsePipeSchedule(const std::string& name);
const char* PipeScheduleName(PipeSchedule s);  // "gpipe" | "1f1b"

struct PipeOp {
  enum class Kind { kForward, kBackward };
  Kind kind;
  int micro;  // micro-batch index 0..micros-1
  bool operator==(const PipeOp&) const = default;
};
std::string PipeOpName(const PipeOp& op);  // "F3", "B0"

// The compute ops stage `stage` (0 = first, stages-1 = last) runs, in order, for `micros`
// micro-batches. Empty when stages < 1, stage is not in [0, stages) or micros < 1.
//
// GPipe: F0..F(m-1) then B0..B(m-1).
// 1F1B (PipeDream-Flush / Megatron non-interleaved): warmup = min(stages-stage-1, micros)
// forwards, then steady-state pairs F(warmup+i), B(i), then the remaining backwards.
//
// Both schedules run backwards in micro-batch order 0..m-1 (torchgpipe runs GPipe's in
// reverse). Same bubble either way, but then every stage accumulates its gradients in the
// same order under either schedule and without pipelining, so --deterministic weights do
// not depend on pp or on the schedule.
std::vector<PipeOp> StageSchedule(PipeSchedule schedule, int stages, int stage, int micros);

// Most micro-batches whose forward activations the stage holds at once (forward done,
// backward not yet): GPipe micros, 1F1B min(stages - stage, micros). 0 for bad arguments.
// This, not the bubble, is why 1F1B exists: stage memory stops growing with micros.
int MaxInFlight(PipeSchedule schedule, int stages, int stage, int micros);

// (p-1)/(m+p-1): the idle share of every stage when all stages cost the same (any
// forward:backward ratio) and communication is free, for GPipe and 1F1B alike. 0 for
// p < 1 or m < 1.
double BubbleFormula(int stages, int micros);

struct PipeOpSpan {
  PipeOp op;
  double start = 0, end = 0;
};

struct PipeSimulation {
  std::vector<double> busy;                    // per stage: time spent computing
  double makespan = 0;                         // first op start (0) to last op end, over all stages
  std::vector<double> bubble;                  // per stage: 1 - busy/makespan
  double mean_bubble = 0;                      // mean of bubble over stages
  std::vector<std::vector<PipeOpSpan>> spans;  // per stage, in run order (for traces)
};

// The dependency rule of a pipeline, shared by every simulation of one (SimulatePipeline here,
// the planner's time-sliced variant): `done[s][PipeOpSlot(op)]` is the finish time of stage s's
// op, or a negative value while it has not run. Returns when stage s's `op` may start as far
// as its inputs go: F(s,i) after F(s-1,i) has finished and `comm` has passed (0 for stage 0);
// B(s,i) after F(s,i) and, below the last stage, B(s+1,i) + `comm`. Negative while an input
// has not finished.
size_t PipeOpSlot(const PipeOp& op);
double PipeOpReadyAt(const std::vector<std::vector<double>>& done, int s, const PipeOp& op, double comm);

// Event-driven run of every stage's StageSchedule; stages = forward_time.size(). F(s,i)
// starts when F(s-1,i) has finished and `comm` has passed (s > 0) and the stage is free;
// B(s,i) when B(s+1,i) has finished plus `comm` (s < last) and F(s,i) has finished. A
// stage runs its ops strictly in schedule order (no lookahead, as the executor will).
// Communication is latency between stages, not stage time: it never counts as busy.
// InvalidArgument for micros < 1, no stages, mismatched sizes, or a negative or
// non-finite time; Internal (naming each stuck stage) if the schedules deadlock.
Result<PipeSimulation> SimulatePipeline(PipeSchedule schedule, int micros, const std::vector<double>& forward_time,
                                        const std::vector<double>& backward_time, double comm = 0);

// The same for explicit per-stage op lists (stage_ops.size() stages), e.g. a hand-written
// order. Each list must hold F(i) and B(i) exactly once for every i in [0, micros)
// (InvalidArgument otherwise); an order that can never finish is Internal, as above.
Result<PipeSimulation> SimulatePipeline(const std::vector<std::vector<PipeOp>>& stage_ops, int micros,
                                        const std::vector<double>& forward_time,
                                        const std::vector<double>& backward_time, double comm = 0);

struct StagePartition {
  std::vector<int> begin;    // stages+1 entries: stage s holds layers [begin[s], begin[s+1])
  std::vector<double> cost;  // per stage, including the extras
  double imbalance = 0;      // max(cost)/mean(cost) - 1: the expected idle share of the
                             // busiest-vs-average stage
  double first_extra = 0;    // as passed to BalanceStages (so DescribePartition can name it)
  double last_extra = 0;
};

// Contiguous partition of layer_cost.size() layers (transformer blocks) into `stages`
// stages of at least one layer each; stage 0 also carries first_extra (embeddings), the
// last stage last_extra (final norm, head, loss). Minimizes the maximum stage cost exactly
// (dynamic programming over (stages, first layer); layers are few).
//
// Ties: of all partitions with the optimal maximum, the one whose boundaries come earliest
// (lexicographically smallest begin), i.e. each stage in turn takes as few layers as it
// can. Under 1F1B stage s keeps min(stages - s, micros) micro-batches of activations, so
// the early stages are the memory-bound ones; layers they can shed go to later stages.
//
// InvalidArgument, one line, for stages < 1, stages > layers, no layers, or a negative
// or non-finite cost.
Result<StagePartition> BalanceStages(const std::vector<double>& layer_cost, double first_extra, double last_extra,
                                     int stages);

// One line: "stage 0: layers 0-1 + embeddings (cost 41%), stage 1: layers 2-3 + head (59%);
// expected imbalance 18%". Shares are of the total cost; an extra is named only when > 0.
std::string DescribePartition(const StagePartition& p);

}  // namespace lockstep::parallel
