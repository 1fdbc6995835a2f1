// The compute profile of `lockstep plan`: what each piece of the model costs on this machine
// for one micro-batch, measured by running it (forward and backward, with the memory tracker
// counting its activations), on `workers` concurrent workers with the threads each would get,
// so the times include the contention of N workers sharing the cores and memory bandwidth.
//   GPT: per (rows, tp) the embeddings (a first stage without blocks), one transformer block
//        (a middle stage of one block) and the head with its loss (a last stage without
//        blocks), each a parallel::GptShard; tp > 1 runs a real tensor-parallel group of tp
//        threads, so its collectives (threads backend) are inside the times.
//   other models (CNN): the whole model per rows (data parallelism only).
//   optimizer: norm, clip and update per element (AdamW or SGD, the config's).
// Profiles are cached as JSON (ComputeProfile::ToJson) under the output directory.
// Code by job: compute_probe.cc (MeasureCompute), zero_probe.cc (the ZeRO figures, also over
// the plan's own workers: MeasureZeroOverRanks), profile_cache.cc (the JSON), and what the two
// probes share, piece_run.h (a piece run on a micro-batch, its memory counted, its passes timed).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/config.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/optim/optim_config.h"
#include "lockstep/planner/step_model.h"

namespace lockstep::planner {

struct GptPieceCosts {
  PieceCost embedding, block, head;
};

using ShapeKey = std::pair<int64_t, int>;  // (rows per micro-batch, tp degree)

struct ComputeProfile {
  int workers = 1, threads_per_worker = 1;
  std::map<ShapeKey, GptPieceCosts> gpt;
  std::map<int64_t, PieceCost> whole;  // rows -> the whole model (non-GPT)
  double optimizer_ns_per_element = 0;

  // workers / cores when more single-threaded workers than cores share them (the factor the
  // pieces' CPU times were stretched by), else 1.
  double oversubscription() const;
  bool Has(const ShapeKey& k, bool is_gpt) const { return is_gpt ? gpt.count(k) > 0 : whole.count(k.first) > 0; }
  // The piece that carries the products at `k` (a GPT block, or the whole model); Has(k) first.
  const PieceCost& Main(const ShapeKey& k, bool is_gpt) const { return is_gpt ? gpt.at(k).block : whole.at(k.first); }
  // Every measured time (each piece's fp32 and bf16 passes, the optimizer's) times `f`; bytes and
  // ZeRO figures (measured apart) unchanged.
  void ScaleTimes(double f);
  nlohmann::json ToJson() const;
  static Result<ComputeProfile> FromJson(const nlohmann::json& j);
};

struct ProfileRequest {
  Config config;  // model.* (and data.kind) after --set
  std::optional<nn::GptConfig> gpt;
  optim::OptimConfig optim;
  int workers = 1, threads_per_worker = 1;
  std::vector<ShapeKey> shapes;    // to measure (those already in `into` are skipped)
  int64_t optimizer_elements = 0;  // elements of the optimizer measurement (capped)
  bool zero = true;                // ZeRO-2/3 per element over the workers (with tp = 1 and 2+ workers)
  int reps = 5;                    // timed passes per piece (round-robin over shapes), after one untimed pass;
                                   // MeasureCompute runs more where they are short (TimedPasses)
};

// How many timed passes a profile's line-up of workers runs per precision, from the slowest
// worker's first timed pass: as many as fit about 1.5 s, at most 21, at least `at_least`
// (ProfileRequest::reps; also when nothing was measured).
int TimedPasses(double first_pass_ms, int at_least);

// What oversubscribed workers (more single-threaded workers than cores: `oversubscribed` =
// workers / cores > 1) lose beyond their fair share of the cores, as a factor >= 1 on the pieces'
// CPU times stretched by `oversubscribed`: a pass ends, as a step does, when its slowest worker
// ends, and tp groups wait for members the scheduler has not run. Per worker, each timed pass's
// wall and CPU milliseconds (from the line-up of all workers); the median over passes of the
// slowest wall against the mean CPU times `oversubscribed`. 1 when not oversubscribed.
double SharingLoss(const std::vector<std::vector<double>>& pass_wall_ms,
                   const std::vector<std::vector<double>>& pass_cpu_ms, double oversubscribed);

// Measures what `into` lacks. Failures (a model that cannot be built) are InvalidArgument.
Status MeasureCompute(const ProfileRequest& req, ComputeProfile* into);

// What MeasureZeroOverRanks measures over the ranks.
struct ZeroProbe {
  std::array<double, 4> zero{};  // {ZeRO-2, ZeRO-3} over a step of one micro-batch, then of kZeroOverlapMicros
  // The plain piece's forward + backward at the first of the rows (the median pass, ending when
  // every rank has ended it, a step's barrier): the compute as the ranks ran it beside each
  // other, processes under mpi, set against the profile's (RunPlan's "the ZeRO probe's plain
  // pass" line).
  int64_t plain_rows = 0;
  double plain_ms = 0;
};

// ZeRO-2 and ZeRO-3's cost in ns per micro-batch and parameter element, as MeasureCompute
// measures it (the block, or the whole model, built as each stage builds it, one unit over
// `dp`, against the plain piece), at each of `rows` (ascending; those after the first ~10 s left
// out), pooled over them: {ZeRO-2, ZeRO-3} over a
// step of one micro-batch (PieceCost::zero_ns_per_element), then the same per micro-batch over
// a step of kZeroOverlapMicros (zero_overlap_ns_per_element). On this rank, one of `dp`'s
// ranks, every one of which calls it (a collective): worker threads of a threads world, or
// mpi processes whose collectives run on each communicator's progress thread beside the compute.
// Also the plain pass (ZeroProbe::plain_ms).
Result<ZeroProbe> MeasureZeroOverRanks(const ProfileRequest& req, const std::vector<int64_t>& rows,
                                       std::shared_ptr<comm::Communicator> dp);

}  // namespace lockstep::planner
