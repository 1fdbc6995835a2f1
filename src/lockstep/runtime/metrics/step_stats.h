// Per-step timings and their cross-rank view. After each step every rank shares a small
// fixed record (bytes all-gather, summed in rank order so every rank derives the same
// numbers); from it rank 0 reports how long the step waited for the slowest worker. The record
// also carries the rank's part of the gradient's exact square sum, so the global norm needs no
// collective of its own: one fewer point per step where every rank waits for the slowest.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/optim/exact_square_sum.h"

namespace lockstep::runtime {

struct RankStepRecord {
  double loss_part = 0;        // this rank's share of the global-batch mean loss
  int64_t compute_end_ns = 0;  // when this rank's backward ended (steady clock)
  double pipe_busy_ms = 0;     // pipeline: time inside this stage's forward/backward passes
  double pipe_total_ms = 0;    // pipeline: the whole schedule (0 without a pipeline)
  double compute_ms = 0;       // forward + backward (pipeline: the busy time), slow fault included
  double wait_ms = 0;          // blocked in the gradient collectives (pipeline: also idle in the schedule)
  int32_t peer_group = 0;      // ranks of one group do the same work (the pipeline stage)
  int32_t pad = 0;
  // Targets of this rank's rows the loss counts (a loss mask leaves some out); counted by one
  // rank per dp replica (tp and pp rank 0), 0 on the others.
  int64_t trained_targets = 0;
  // This rank's counted gradient elements, squared and summed exactly (ExactSquareSum::ToWords).
  std::array<int64_t, optim::ExactSquareSum::kWords> norm_words{};
};

struct GatheredStep {
  double loss = 0;         // global-batch mean loss
  int64_t trained_targets = 0;  // the global batch's targets the loss counts
  double wait_ms = 0;      // this rank: how long after its backward the slowest one ended
  double mean_bubble = 0;  // pipeline: mean over ranks of 1 - busy/total
  // Pipeline: 1 - busy/total of the busiest rank. Stages never cost exactly the same; the
  // faster ones also idle waiting for the slowest, so the mean sits above (p-1)/(m+p-1) by
  // about the imbalance, while the bottleneck stage's idle time is the fill and drain alone.
  double bottleneck_bubble = 0;
  std::vector<double> busy_ms;  // pipeline: every rank's busy time, in rank order
  // Every rank's compute and collective-wait time and peer group, in rank order (straggler view).
  std::vector<double> compute_ms, rank_wait_ms;
  std::vector<int> peer_group;
  // Every rank's norm_words summed: the global gradient's exact square sum (the same bits on
  // every rank, however the gradient is cut up; ExactSquareSum::FromWords reads it).
  std::array<int64_t, optim::ExactSquareSum::kWords> norm_words{};
};

Result<GatheredStep> GatherStep(comm::Communicator& comm, const RankStepRecord& mine);

// Evaluation sums of one rank, combined over ranks in rank order.
struct EvalSums {
  double loss_sum = 0;
  int64_t count = 0;
  int64_t correct = 0;
};
Result<EvalSums> GatherEval(comm::Communicator& comm, const EvalSums& mine);

}  // namespace lockstep::runtime
