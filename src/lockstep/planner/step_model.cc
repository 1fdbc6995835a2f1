#include "lockstep/planner/step_model.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "lockstep/parallel/grad_buckets.h"
#include "lockstep/parallel/zero.h"
#include "lockstep/parallel/zero_units.h"

namespace lockstep::planner {
namespace {

constexpr int64_t kF32 = 4;

// A collective issued when its data is ready (at `ready` ms into a window), run one after
// another: returns when the last one ends, relative to the window's start.
struct Launch {
  double ready = 0, ms = 0;
};
double RunSerial(const std::vector<Launch>& launches) {
  double t = 0;
  for (const Launch& l : launches) t = std::max(t, l.ready) + l.ms;
  return t;
}

// Where the gradient of flat element `begin` onward is final, as a share of the backward:
// backward walks the parameters from last to first, at a rate proportional to their size.
double ReadyShare(int64_t begin, int64_t numel) {
  return numel > 0 ? static_cast<double>(numel - begin) / static_cast<double>(numel) : 1.0;
}

std::vector<int64_t> Offsets(const std::vector<int64_t>& numels) {
  std::vector<int64_t> off(numels.size(), 0);
  for (size_t i = 1; i < numels.size(); ++i) off[i] = off[i - 1] + numels[i - 1];
  return off;
}

struct UnitRange {
  int64_t begin = 0, numel = 0;
};
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

// Data-parallel communication of one stage in one step: what is not hidden behind the
// backward passes, and everything together.
struct DpComm {
  double exposed_ms = 0, total_ms = 0;
};

DpComm DataParallelComm(const LayoutInput& in, const StageCost& s, const CommTable& comm) {
  DpComm out;
  const int dp = in.dp;
  if (dp <= 1) return out;
  const int64_t numel = s.numel();
  const int m = in.micros;
  if (in.zero <= 1) {
    if (in.pp > 1) {  // one allreduce of the whole gradient after the pipeline
      out.total_ms = out.exposed_ms = comm.Ms(CommOp::kAllreduce, dp, kF32 * numel);
    } else {  // DDP buckets launched as the last micro-batch's backward finalises them
      const parallel::BucketPlan plan = parallel::PlanBuckets(Offsets(s.param_numels), s.param_numels, in.bucket_bytes);
      std::vector<Launch> launches;
      for (const parallel::GradBucket& b : plan.buckets) {
        const double ms = comm.Ms(CommOp::kAllreduce, dp, kF32 * (b.end - b.begin));
        launches.push_back({ReadyShare(b.begin, numel) * s.bwd_ms, ms});
        out.total_ms += ms;
      }
      out.exposed_ms = std::max(0.0, RunSerial(launches) - s.bwd_ms);
    }
  } else {  // ZeRO-2/3: each unit's gradient reduce-scattered after its backward, every micro-batch
    std::vector<Launch> launches;
    double per_micro = 0;
    const std::vector<UnitRange> units = UnitRanges(s);
    for (auto it = units.rbegin(); it != units.rend(); ++it) {
      const double ms = comm.Ms(CommOp::kReduceScatter, dp, kF32 * it->numel);
      launches.push_back({ReadyShare(it->begin, numel) * s.bwd_ms, ms});
      per_micro += ms;
    }
    out.total_ms += m * per_micro;
    double modelled = m * std::max(0.0, RunSerial(launches) - s.bwd_ms);
    if (in.zero == 3) {  // parameters gathered before each unit's forward and backward, one unit ahead
      for (double pass_ms : {s.fwd_ms, s.bwd_ms}) {
        double exposed = 0, prev_compute = 0;
        for (const UnitRange& u : units) {
          const double g = comm.Ms(CommOp::kAllGather, dp, kF32 * ZeroShard(u.numel, dp) * dp);
          exposed += std::max(0.0, g - prev_compute);
          out.total_ms += m * g;
          prev_compute = numel > 0 ? pass_ms * static_cast<double>(u.numel) / static_cast<double>(numel) : 0;
        }
        modelled += m * exposed;
      }
    }
    // Measured on this machine (the profile's ZeRO passes) when there is a measurement: the
    // threads backend's collectives run on the cores that compute, so on a busy machine they
    // cost their time rather than hiding behind backward.
    const double measured_ns = s.zero_ns_per_element[in.zero - 2];
    // The figure is one unit's cost over the profile's workers in lock-step, scaled per element.
    // With more workers than cores a ZeRO-3 micro-batch costs two units (the stage's two
    // largest) whatever the model's size: the first unit's gathers in forward and in backward,
    // which nothing can hide; the others are prefetched while other ranks compute. Trained
    // gpt-tiny, ZeRO-3 over ZeRO-0 per micro-batch: dp=4 on 2 cores ~5 ms with 2 and with 4
    // layers (the per-element figure gave 6 and 11), dp=8 ~25 ms at 4 layers (22.6 for two
    // units). With a core per worker the copies run on cores that compute, and they grow with
    // the model (gpt-small: ~1 GB a micro-batch), so the per-element figure stays (gpt-tiny
    // 2-worker ZeRO-3 rows -1..+3% with it).
    // In a pipeline with 4 or more workers a core, one unit: a stage also waits for its
    // neighbours (their activations and gradients), and one of the two first-unit gathers goes by
    // in that wait. Measured (gpt-tiny, fp32, ZeRO-3 over ZeRO-0 a step, two or three runs each):
    // on 8 threads and 2 cores dp=4,pp=2 with 4 micro-batches +22..+26 ms and with 2 +11..+14 (two
    // units a micro-batch predicted +55 and +27; one, +28 and +14), dp=2,pp=4 with 4 +17..+24
    // (two +34, one +28); the plan rows of those layouts trained 26-37% faster than predicted in
    // stops 31-33. With 2 workers a core it does not hold: dp=2,pp=2 on 4 threads +20..+23 with 2
    // and 4 micro-batches, against +7 and +15 with two units (one: +3.5, +7.5), so two stay there.
    double counted = static_cast<double>(numel);
    if (in.zero == 3 && in.oversubscription > 1)
      counted = std::min(counted, static_cast<double>(s.largest_units(in.pp > 1 && in.oversubscription >= 4 ? 1 : 2)));
    // Measured over a step of one micro-batch (c1) and of M = kZeroOverlapMicros (cM each):
    // the step's first micro-batch costs c1, each further one (M cM - c1) / (M - 1), what a
    // reduction beside the next micro-batch's compute adds. cnn-fashion, 4 processes on 2
    // cores (mpi), ZeRO-2 over six plans: c1 0-28 ns, cM 10-25; trained over ZeRO-0 +0.5, +1.3
    // and +2.7 ms a step with 1, 2 and 4 micro-batches, where m x the threads' c1 (1-5 ns)
    // predicted at most 1 ms.
    double step_ns = m * measured_ns;
    const double overlap_ns = s.zero_overlap_ns_per_element[in.zero - 2];
    if (overlap_ns > 0 && m > 1) {
      constexpr int M = kZeroOverlapMicros;
      step_ns = measured_ns + (m - 1) * std::max(0.0, (M * overlap_ns - measured_ns) / (M - 1));
    }
    out.exposed_ms = measured_ns > 0 ? step_ns * counted * 1e-6 : modelled;
  }
  if (in.zero == 1 || in.zero == 2) {  // the updated shards all-gathered after the optimizer
    const double g = comm.Ms(CommOp::kAllGather, dp, kF32 * ZeroShard(numel, dp) * dp);
    out.total_ms += g;
    out.exposed_ms += g;
  }
  return out;
}

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

StageMemory MemoryOf(const LayoutInput& in, const StageCost& s, int stage) {
  StageMemory mem;
  const int64_t numel = s.numel(), shard = ZeroShard(numel, in.dp), unit = s.largest_unit();
  mem.params_bytes = kF32 * (in.zero == 3 ? shard : numel);
  mem.grads_bytes = kF32 * (in.zero >= 2 ? shard : numel);
  mem.optimizer_bytes = kF32 * in.optimizer_moments * (in.zero >= 1 ? shard : numel);
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
  // its fp32 peak to the byte, where one unit's copy had the rows +0.5..+2.5% high).
  const int64_t weight_copy = in.zero == 3 ? 0 : in.weight_copy_bytes * numel;
  mem.in_flight_bytes = step_units + weight_copy;
  const int in_flight = in.pp > 1 ? parallel::MaxInFlight(in.schedule, in.pp, stage, in.micros) : 1;
  // One tape, and so one buffer pool, per micro-batch in flight (PipelineRunner's slots): each
  // pool grows to a micro-batch's saved activations plus its backward's workspace and keeps them.
  const int64_t step = in_flight * (s.saved_bytes + s.workspace_bytes + s.stream_bytes);
  mem.activation_bytes = std::max(step, s.eval_bytes);
  mem.kernel_bytes = s.kernel_bytes;
  // The peak is the step's or the evaluation's, whichever holds more at once (not the largest
  // units beside the largest activations: +16..+23% on ZeRO-3 rows whose evaluation is the peak).
  mem.peak_bytes = mem.params_bytes + mem.grads_bytes + mem.optimizer_bytes + weight_copy + mem.kernel_bytes +
                   std::max(step_units + step, gathered + s.eval_bytes);
  return mem;
}

// The pipeline's makespan when its workers outnumber the cores, as the scheduler shares them:
// every stage's dp x tp workers compute together, and whatever runs at a moment shares the
// cores equally (a fluid model of time slicing). `fwd`/`bwd` are stage times at the shared
// speed of all N workers (N / cores = in.oversubscription each); a stage alone would run
// in.oversubscription times faster, up to a core per worker. Dependencies are
// parallel::SimulatePipeline's (PipeOpReadyAt); each stage runs its ops in schedule order.
double SharedCoreMakespan(const LayoutInput& in, int m, const std::vector<double>& fwd, const std::vector<double>& bwd,
                          double send_ms) {
  using Kind = parallel::PipeOp::Kind;
  const int stages = in.pp;
  // Stages that can run at a core per worker at once: pp / oversubscription.
  const double capacity = stages / in.oversubscription;
  std::vector<std::vector<parallel::PipeOp>> ops;
  for (int s = 0; s < stages; ++s) ops.push_back(parallel::StageSchedule(in.schedule, stages, s, m));
  std::vector<std::vector<double>> done(stages, std::vector<double>(2 * static_cast<size_t>(m), -1.0));
  std::vector<size_t> next(stages, 0);
  std::vector<double> left(stages, -1);  // work left of the running op (own-core ms); -1: none
  double now = 0;
  for (;;) {
    int running = 0;
    double next_ready = -1;
    for (int s = 0; s < stages; ++s) {
      if (left[s] < 0 && next[s] < ops[s].size()) {
        const double r = parallel::PipeOpReadyAt(done, s, ops[s][next[s]], send_ms);
        if (r >= 0 && r <= now) {
          const parallel::PipeOp& op = ops[s][next[s]];
          left[s] = (op.kind == Kind::kForward ? fwd[s] : bwd[s]) / in.oversubscription;
        } else if (r > now && (next_ready < 0 || r < next_ready)) {
          next_ready = r;
        }
      }
      if (left[s] >= 0) ++running;
    }
    if (running == 0 && next_ready < 0) break;  // all done (the schedules cannot deadlock)
    const double speed = running > 0 ? std::min(1.0, capacity / running) : 1.0;
    double step = next_ready >= 0 ? next_ready - now : std::numeric_limits<double>::infinity();
    for (int s = 0; s < stages; ++s)
      if (left[s] >= 0) step = std::min(step, left[s] / speed);
    now += step;
    for (int s = 0; s < stages; ++s) {
      if (left[s] < 0) continue;
      left[s] -= step * speed;
      if (left[s] > 1e-12) continue;
      done[s][parallel::PipeOpSlot(ops[s][next[s]])] = now;
      ++next[s];
      left[s] = -1;
    }
  }
  return now;
}

}  // namespace

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

StageCost ComposeStage(const StagePieces& p, const ComputeOptions& o) {
  StageCost s;
  // bf16 measured on the piece that carries the products (the block, or a whole model): its
  // own times and activation bytes; the embedding (a lookup) and the head keep fp32's.
  const bool measured_bf16 = o.bf16 && (p.block.bf16_fwd_ms > 0 || p.embedding.bf16_fwd_ms > 0);
  auto as_run = [&](PieceCost c) {
    if (measured_bf16 && c.bf16_fwd_ms > 0) {
      c.fwd_ms = c.bf16_fwd_ms;
      c.bwd_ms = c.bf16_bwd_ms;
      c.warm_fwd_ms = c.bf16_warm_fwd_ms;
      c.warm_bwd_ms = c.bf16_warm_bwd_ms;
      c.recompute_fwd_ms = c.bf16_recompute_fwd_ms;
      c.saved_bytes = c.bf16_saved_bytes;
      c.peak_bytes = c.bf16_peak_bytes;
      c.kernel_bytes += c.bf16_kernel_bytes;
    }
    return c;
  };
  auto add = [&](const PieceCost& piece, int times, bool recompute) {
    const PieceCost c = as_run(piece);
    if (times <= 0) return;
    const int64_t kept = recompute ? p.block_input_bytes : c.saved_bytes;
    // Recompute: the forward releases what it saved (recompute_fwd_ms), backward redoes the
    // recorded forward and runs backward. gpt-tiny dp=1,pp=2, 8 micro-batches of 2 rows: the
    // stages' busy time grew by 0.66 (bf16) and 0.77 (fp32) of the blocks' profiled forward, not
    // by one forward (+8% and +6% a step, +17% in other pipelines).
    const double released_fwd = c.recompute_fwd_ms > 0 ? c.recompute_fwd_ms : c.fwd_ms;
    s.fwd_ms += times * (recompute ? released_fwd : c.fwd_ms);
    s.bwd_ms += times * (c.bwd_ms + (recompute ? c.fwd_ms : 0.0));
    const double warm_fwd = c.warm_fwd_ms > 0 ? c.warm_fwd_ms : c.fwd_ms;
    const double warm_bwd = c.warm_bwd_ms > 0 ? c.warm_bwd_ms : c.bwd_ms;
    s.warm_fwd_ms += times * (recompute ? released_fwd : warm_fwd);
    s.warm_bwd_ms += times * (warm_bwd + (recompute ? warm_fwd : 0.0));
    s.saved_bytes += times * kept;
    s.kernel_bytes += times * c.kernel_bytes;
    s.workspace_bytes = std::max(s.workspace_bytes, c.peak_bytes - kept);
  };
  if (p.has_embedding) add(p.embedding, 1, false);
  add(p.block, p.blocks, o.recompute_blocks);
  if (p.has_head) add(p.head, 1, false);
  // What a micro-batch in flight holds beyond its pieces' measured bytes, in [rows, T, C] fp32
  // tensors (block_input_bytes; 0 for a whole model). parallel::PipelineRunner keeps a stage's
  // output to its backward (not the last stage) and the gradient of its received input until
  // it is sent (not the first). Recompute holds one more where the block's output and its
  // recomputed copy meet (the last stage: one; other stages two, three with two or more
  // blocks). Measured, gpt-tiny dp=1 with 4 micro-batches of 4 rows, per micro-batch in flight
  // beyond the pieces: pp=4 stages 1, 2, 2, 1 without recompute and 3, 4, 4, 2 with it (one
  // block a stage), with two blocks a stage 1, 2, 2, 1 and 4, 5, 5, 2; pp=2 with 2 and 4 blocks
  // 1, 1 and 4, 2; one worker 0 and 1. On the last stage a tensor-parallel block's recompute
  // holds none more (dp=1,tp=2, 4 accumulation steps: 20.79 MB without, 20.81 measured); on the
  // others it holds the same (dp=1,tp=2,pp=2 with recompute was -9% without them).
  const bool first = p.has_embedding, last = p.has_head;
  int streams = (last ? 0 : 1) + (first ? 0 : 1);
  if (o.recompute_blocks && p.blocks > 0) streams += last ? (p.tensor_parallel ? 0 : 1) : (p.blocks >= 2 ? 3 : 2);
  s.stream_bytes = streams * p.block_input_bytes;
  s.send_bytes = p.send_bytes;
  s.eval_bytes = p.eval_bytes;
  s.kernel_bytes += p.eval_kernel_bytes;
  for (int k = 0; k < 2; ++k) {  // measured on one piece (the block, or a whole model)
    s.zero_ns_per_element[k] =
        std::max({p.embedding.zero_ns_per_element[k], p.block.zero_ns_per_element[k], p.head.zero_ns_per_element[k]});
    s.zero_overlap_ns_per_element[k] =
        std::max({p.embedding.zero_overlap_ns_per_element[k], p.block.zero_overlap_ns_per_element[k],
                  p.head.zero_overlap_ns_per_element[k]});
  }
  if (o.bf16 && !measured_bf16) {  // a described assumption, not this implementation's
    const double speed = o.bf16_speedup > 0 ? o.bf16_speedup : 1.0;
    s.fwd_ms /= speed;
    s.bwd_ms /= speed;
    s.warm_fwd_ms /= speed;
    s.warm_bwd_ms /= speed;
    s.saved_bytes /= 2;
    s.workspace_bytes /= 2;
    s.send_bytes /= 2;
    s.eval_bytes /= 2;
  }
  return s;
}

Result<Prediction> PredictLayout(const LayoutInput& in, const CommTable& comm) {
  if (in.stages.empty() || static_cast<int>(in.stages.size()) != in.pp || in.micros < 1 || in.dp < 1 || in.tp < 1)
    return Status::InvalidArgument("PredictLayout: " + std::to_string(in.stages.size()) +
                                   " stages for pp=" + std::to_string(in.pp) + ", micros=" + std::to_string(in.micros));
  Prediction pr;
  const int m = in.micros;
  for (int s = 0; s < in.pp; ++s) {
    pr.memory.push_back(MemoryOf(in, in.stages[static_cast<size_t>(s)], s));
    pr.peak_bytes = std::max(pr.peak_bytes, pr.memory.back().peak_bytes);
  }
  // Forward and backward of all micro-batches; described machines add the tp collectives.
  std::vector<double> fwd, bwd;
  double tp_ms = 0, send_ms = 0;
  for (const StageCost& s : in.stages) {
    const double extra = s.tp_comm_in_compute ? 0.0 : s.tp_comm_ms;
    fwd.push_back(s.fwd_ms + extra / 2);
    bwd.push_back(s.bwd_ms + extra / 2);
    tp_ms = std::max(tp_ms, m * s.tp_comm_ms);
    send_ms = std::max(send_ms, comm.Ms(CommOp::kSend, 2, s.send_bytes));
  }
  if (in.pp == 1) {
    // Accumulation: the micro-batches run back to back on each worker, and each after the first
    // finds the model's weights and buffers warm (cnn-fashion on 8 threads and 2 cores, a
    // 2-row micro-batch: 0.39 against 0.44 ms CPU forward + backward; charged cold, the rows with
    // 2 and 4 micro-batches trained 15-22% faster than predicted).
    // ComposeStage always fills the warm times; a stage built by hand (tests) may leave them 0.
    const StageCost& s = in.stages[0];
    const double cold = fwd[0] + bwd[0];
    const double warm = s.warm_fwd_ms > 0 || s.warm_bwd_ms > 0
                            ? cold - (s.fwd_ms + s.bwd_ms) + s.warm_fwd_ms + s.warm_bwd_ms  // + the tp collectives
                            : cold;
    pr.pipeline_ms = pr.compute_ms = cold + (m - 1) * warm;
  } else {
    LS_ASSIGN_OR_RETURN(parallel::PipeSimulation sim, parallel::SimulatePipeline(in.schedule, m, fwd, bwd, send_ms));
    pr.pipeline_ms = sim.makespan;
    pr.bubble = sim.mean_bubble;
    pr.compute_ms = *std::max_element(sim.busy.begin(), sim.busy.end());
    // The stage times are a worker's share of a core while every worker computes; a stage
    // idling in the bubble leaves its core to the others (gpt-tiny dp=2,pp=4 on 8 threads and 2
    // cores: 111 ms predicted at the shared speed throughout, 62 measured).
    if (in.oversubscription > 1) pr.pipeline_ms = SharedCoreMakespan(in, m, fwd, bwd, send_ms);
  }
  // After the pipeline: the stage that finishes last sets the step.
  double tail = 0, dp_exposed = 0;
  for (const StageCost& s : in.stages) {
    const DpComm c = DataParallelComm(in, s, comm);
    const int64_t owned = in.zero >= 1 ? ZeroShard(s.numel(), in.dp) : s.numel();
    const double opt = in.optimizer_ns_per_element * static_cast<double>(owned) * 1e-6;
    if (c.exposed_ms + opt >= tail) {
      tail = c.exposed_ms + opt;
      dp_exposed = c.exposed_ms;
      pr.optimizer_ms = opt;
    }
    pr.comm_total_ms = std::max(pr.comm_total_ms, c.total_ms + m * s.tp_comm_ms + 2.0 * m * send_ms);
  }
  // Nothing overlaps them: each waits for every rank to finish its step. With workers sharing
  // the cores their latency is that of the slowest rank to be scheduled, which the measured
  // curve of the world group includes (cnn-fashion on 8 threads, 2 cores: ~0.12 ms each).
  const int world = in.dp * in.tp * in.pp;
  pr.step_sync_ms = comm.Ms(CommOp::kAllGather, world, in.step_stats_bytes * world);
  pr.comm_exposed_ms = dp_exposed + tp_ms + pr.step_sync_ms;
  pr.comm_total_ms += pr.step_sync_ms;
  pr.step_ms = pr.pipeline_ms + tail + pr.step_sync_ms;
  return pr;
}

}  // namespace lockstep::planner
