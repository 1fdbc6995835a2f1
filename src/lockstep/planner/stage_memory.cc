// A stage's memory (stage_memory.h): the model states as StatesOf counts them, then what lockstep
// holds beside them (parallel::ZeroUnits' units, one buffer pool per micro-batch in flight), or
// what a described machine's framework holds (StageCost::Described).
#include "lockstep/planner/stage_memory.h"

#include <algorithm>
#include <numeric>

#include "lockstep/parallel/pipeline_schedule.h"
#include "lockstep/parallel/zero.h"
#include "lockstep/parallel/zero_units.h"

namespace lockstep::planner {
namespace step {
namespace {

// The parts of the units' gradients that dp rank 0 receives (its owned range, the first
// ceil(numel / dp) elements, cut by each unit), the kMaxPendingUnits + kMaxSpares largest of
// them: those of the reductions in flight and their spares. A unit's part is not unit / dp:
// rank 0 owns the stage's first elements, so it receives the first units whole and none of the
// last (gpt-tiny dp=2,pp=2, stage 0 of the embedding and two blocks: the embedding and 173696 of
// the first block's 198272, 2.25 block shards; the flat four shards had those rows +4.4..+4.7%
// high).
int64_t ReceivedParts(const StageCost& s, int dp) {
  const optim::FlatRange own = parallel::ShardRange(s.numel(), 0, dp);
  std::vector<int64_t> parts;
  for (const UnitRange& u : UnitRanges(s))
    parts.push_back(std::max<int64_t>(0, std::min(own.end, u.begin + u.numel) - std::max(own.begin, u.begin)));
  std::sort(parts.begin(), parts.end(), std::greater<>());
  constexpr size_t kParts = parallel::ZeroUnits::kMaxPendingUnits + parallel::ZeroUnits::kMaxSpares;
  if (parts.size() > kParts) parts.resize(kParts);
  return std::accumulate(parts.begin(), parts.end(), int64_t{0});
}

}  // namespace

std::vector<int64_t> Offsets(const std::vector<int64_t>& numels) {
  std::vector<int64_t> off(numels.size(), 0);
  for (size_t i = 1; i < numels.size(); ++i) off[i] = off[i - 1] + numels[i - 1];
  return off;
}

std::vector<UnitRange> UnitRanges(const StageCost& s) {
  const std::vector<int64_t> off = Offsets(s.param_numels);
  std::vector<UnitRange> out;
  for (auto [first, end] : s.units) {
    if (first >= end) continue;
    const int64_t b = off[first], e = off[end - 1] + s.param_numels[end - 1];
    out.push_back({b, e - b});
  }
  return out;
}

StageMemory MemoryOf(const LayoutInput& in, const StageCost& s, int stage) {
  StageMemory mem;
  const ModelStates states = StatesOf(in.states, in.zero, in.dp, s.numel());
  mem.params_bytes = states.params_bytes;
  mem.grads_bytes = states.grads_bytes;
  mem.optimizer_bytes = states.optimizer_bytes;
  mem.kernel_bytes = s.kernel_bytes;
  if (s.described) {  // the framework's own units and activations (StageCost::Described)
    mem.in_flight_bytes = states.copy_bytes + s.described->in_flight_bytes;
    mem.activation_bytes = s.described->activation_bytes;
    mem.peak_bytes = mem.params_bytes + mem.grads_bytes + mem.optimizer_bytes + mem.in_flight_bytes +
                     mem.activation_bytes + mem.kernel_bytes;
    return mem;
  }
  const int64_t unit = s.largest_unit();
  // At the peak, as parallel::ZeroUnits holds them: whole-unit gradient buffers, which cycle
  // between the unit being filled and the oldest reduction in flight (kMaxPendingUnits = 2 of
  // them), and the parts of units this rank receives, a shard (unit / dp) each: those of the
  // reductions in flight and their spares (kMaxPendingUnits + kMaxSpares = 4). Measured with the
  // tracker, gpt-tiny ZeRO-2 with 2 accumulation steps, beyond states and peak activations:
  // 4.13, 3.27 and 2.72 block units at dp = 2, 4, 8, against 4, 3 and 2.5 from this count (a
  // flat 4 units had dp=8 rows +7..+8% high). ZeRO-3 adds two gathered units of parameters
  // (the one being differentiated, the next one prefetched: +2.0 units measured at dp=8).
  // A stage of one unit (a whole CNN) has nothing to prefetch, reduce behind or spare: its
  // gradient, the part of it this rank receives (1/dp), and with ZeRO-3 its parameters
  // (measured, cnn-fashion dp=2: 1.5 and 1 units). Two units at once are the two largest, not
  // twice the largest: a first pipeline stage of the embedding and one block holds the two.
  constexpr int kGradUnits = parallel::ZeroUnits::kMaxPendingUnits;
  const bool one_unit = s.units.size() <= 1;
  int64_t step_units = 0;
  if (in.zero >= 2)
    step_units = one_unit ? kF32 * (unit + ZeroShard(unit, in.dp))
                          : kF32 * (s.largest_units(kGradUnits) + ReceivedParts(s, in.dp));
  // Evaluation computes no gradients: ZeRO-2 holds no gradient unit then, ZeRO-3 only its
  // gathered parameters (measured, gpt-tiny dp=4 with 4 accumulation steps and recompute, where
  // the evaluation is the peak: 0.2 and 2.25 block units beside the activations).
  const int64_t gathered = in.zero == 3 ? kF32 * s.largest_units(one_unit ? 1 : 2) : 0;
  step_units += gathered;
  // bf16: the weights' bf16 copy of the whole local model. ZeRO-3 keeps none: its parameters
  // live in gathered units without a flat store, and each product rounds its weight into the
  // thread's operand scratch like any other operand (Trainer::KeepsBf16Weights; measured,
  // gpt-tiny dp=4 with 1 and 2 micro-batches and dp=2,pp=2 with 2 and 8: ZeRO-3's bf16 peak is
  // its fp32 peak to the byte, where one unit's copy had the rows +0.5..+2.5% high): StatesOf.
  const int64_t weight_copy = states.copy_bytes;
  mem.in_flight_bytes = step_units + weight_copy;
  const int in_flight = in.pp > 1 ? parallel::MaxInFlight(in.schedule, in.pp, stage, in.micros) : 1;
  // One tape, and so one buffer pool, per micro-batch in flight (PipelineRunner's slots): each
  // pool grows to a micro-batch's saved activations plus its backward's workspace and keeps them.
  const int64_t step = in_flight * (s.saved_bytes + s.workspace_bytes + s.stream_bytes);
  mem.activation_bytes = std::max(step, s.eval_bytes);
  // The peak is the step's or the evaluation's, whichever holds more at once (not the largest
  // units beside the largest activations: +16..+23% on ZeRO-3 rows whose evaluation is the peak).
  mem.peak_bytes = mem.params_bytes + mem.grads_bytes + mem.optimizer_bytes + weight_copy + mem.kernel_bytes +
                   std::max(step_units + step, gathered + s.eval_bytes);
  return mem;
}

}  // namespace step

int64_t ZeroShard(int64_t numel, int dp) { return dp <= 1 ? numel : (numel + dp - 1) / dp; }

int64_t StageCost::numel() const { return std::accumulate(param_numels.begin(), param_numels.end(), int64_t{0}); }

int64_t StageCost::largest_unit() const { return largest_units(1); }

int64_t StageCost::largest_units(int k) const {
  std::vector<int64_t> sizes;
  for (auto [first, end] : units) {
    int64_t n = 0;
    for (int i = first; i < end; ++i) n += param_numels[static_cast<size_t>(i)];
    sizes.push_back(n);
  }
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  return std::accumulate(sizes.begin(), sizes.begin() + std::min<ptrdiff_t>(k, std::ssize(sizes)), int64_t{0});
}

ModelStates StatesOf(const StateBytes& b, int zero, int dp, int64_t numel) {
  using step::kF32;
  const int64_t shard = ZeroShard(numel, dp);
  auto held = [&](int sharded_from) { return zero >= sharded_from ? shard : numel; };
  const bool in_optimizer = b.master == StateBytes::Master::kOptimizer;
  const int64_t master = kF32 * held(in_optimizer ? 1 : 3);
  const int64_t copy = zero == 3 ? 0 : b.copy_bytes * numel;
  ModelStates st;
  st.grads_bytes = kF32 * held(2);
  st.optimizer_bytes = b.moment_bytes * held(1);
  if (!in_optimizer) {
    st.params_bytes = master;
    st.copy_bytes = copy;
  } else if (zero == 3) {
    st.params_bytes = master;  // FSDP's parameters: the sharded fp32 master, gathered as bf16
  } else {
    st.params_bytes = copy;
    st.optimizer_bytes += master;
  }
  return st;
}

}  // namespace lockstep::planner
