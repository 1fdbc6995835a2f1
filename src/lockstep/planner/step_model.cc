// The step model's time terms and PredictLayout (step_model.h): the pipeline (accumulation, the
// executor's schedule simulated, or a described machine's in closed form), the data-parallel
// communication after it, the optimizer and the step's end; the memory is stage_memory.cc's.
#include "lockstep/planner/step_model.h"

#include <algorithm>
#include <limits>

#include "lockstep/parallel/grad_buckets.h"
#include "lockstep/parallel/zero.h"
#include "lockstep/planner/stage_memory.h"

namespace lockstep::planner {
namespace {

using step::kF32;
using step::MemoryOf;
using step::Offsets;
using step::UnitRange;
using step::UnitRanges;

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

// Data-parallel communication of one stage in one step: what is not hidden behind the
// backward passes, and everything together.
struct DpComm {
  double exposed_ms = 0, total_ms = 0;
  double bytes = 0;  // the ring count of what the rank sends (Prediction::dp_bytes)
};

// A dp collective of `bytes` as the layout places its group: inside a machine, or across
// in.hosts.dp_hosts hosts whose links in.hosts.dp_share groups use at once (each its share).
double DpMs(const LayoutInput& in, const CommTable& comm, CommOp op, int64_t bytes) {
  const HostPlacement& h = in.hosts;
  return comm.Ms(op, in.dp, bytes, h.dp_hosts) * (h.dp_hosts > 1 ? h.dp_share : 1);
}

// A pipeline stage's send, between two hosts when the boundary crosses one (its ranks on a host
// sending at once, each its share of the link).
double SendMs(const LayoutInput& in, const CommTable& comm, int64_t bytes) {
  const HostPlacement& h = in.hosts;
  return h.send_across ? comm.Ms(CommOp::kSend, 2, bytes, 2) * h.send_share : comm.Ms(CommOp::kSend, 2, bytes);
}

DpComm DataParallelComm(const LayoutInput& in, const StageCost& s, const CommTable& comm) {
  DpComm out;
  const int dp = in.dp;
  if (dp <= 1) return out;
  const int64_t numel = s.numel();
  const int m = in.micros;
  // Ring counts (comm/counting_communicator.h): allreduce 2(p-1)/p of the buffer, reduce-scatter
  // and all-gather (p-1)/p.
  const double ring = static_cast<double>(dp - 1) / dp;
  using Kind = LayoutInput::LowComm::Kind;
  const LayoutInput::LowComm& low = in.low_comm;
  if (low.kind == Kind::kPowerSgd) {  // after backward: plain, P, Q, each one allreduce, nothing hidden
    for (int64_t n : {low.plain, low.p, low.q}) out.total_ms += n > 0 ? DpMs(in, comm, CommOp::kAllreduce, kF32 * n) : 0;
    out.exposed_ms = out.total_ms + low.compress_ms;
    out.bytes = 2 * ring * kF32 * static_cast<double>(low.plain + low.p + low.q);
    return out;
  }
  if (low.kind == Kind::kDiloco) {
    // Each of F fragments' outer gradient once in H steps. Overlapped (tau > 0), an exchange runs
    // beside tau steps' compute and only what outlasts them is exposed.
    const int64_t f = std::max<int64_t>(1, low.fragments);
    const double h = static_cast<double>(low.inner_steps);
    const double one = DpMs(in, comm, CommOp::kAllreduce, low.outer_bytes * numel / f);
    const double step_compute = m * (s.fwd_ms + s.bwd_ms);
    const double hidden = std::min(one, static_cast<double>(low.overlap_steps) * step_compute);
    out.total_ms = static_cast<double>(f) * one / h;
    out.exposed_ms = static_cast<double>(f) * (one - hidden) / h;
    out.bytes = 2 * ring * static_cast<double>(low.outer_bytes * numel) / h;
    return out;
  }
  // Gradients: an allreduce (ZeRO 0/1), or a reduce-scatter a micro-batch (2/3); parameters
  // all-gathered after the update (1/2), or before each unit's forward and backward (3).
  const double grads = in.zero <= 1 ? 2 * ring * kF32 * numel : m * ring * kF32 * numel;
  const double params = in.zero == 1 || in.zero == 2 ? ring * kF32 * numel : in.zero == 3 ? 2 * m * ring * kF32 * numel : 0;
  out.bytes = grads + params;
  if (in.zero <= 1) {
    if (in.pp > 1) {  // one allreduce of the whole gradient after the pipeline
      out.total_ms = out.exposed_ms = DpMs(in, comm, CommOp::kAllreduce, kF32 * numel);
    } else {  // DDP buckets launched as the last micro-batch's backward finalises them
      const parallel::BucketPlan plan = parallel::PlanBuckets(Offsets(s.param_numels), s.param_numels, in.bucket_bytes);
      std::vector<Launch> launches;
      for (const parallel::GradBucket& b : plan.buckets) {
        const double ms = DpMs(in, comm, CommOp::kAllreduce, kF32 * (b.end - b.begin));
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
      const double ms = DpMs(in, comm, CommOp::kReduceScatter, kF32 * it->numel);
      launches.push_back({ReadyShare(it->begin, numel) * s.bwd_ms, ms});
      per_micro += ms;
    }
    out.total_ms += m * per_micro;
    double modelled = m * std::max(0.0, RunSerial(launches) - s.bwd_ms);
    if (in.zero == 3) {  // parameters gathered before each unit's forward and backward, one unit ahead
      for (double pass_ms : {s.fwd_ms, s.bwd_ms}) {
        double exposed = 0, prev_compute = 0;
        for (const UnitRange& u : units) {
          const double g = DpMs(in, comm, CommOp::kAllGather, kF32 * ZeroShard(u.numel, dp) * dp);
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
    // Across hosts the figure (taken among this machine's workers) is not the link's: the
    // collectives' curves measured across the hosts model it.
    const double measured_ns = in.hosts.dp_hosts > 1 ? 0 : s.zero_ns_per_element[in.zero - 2];
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
    const double g = DpMs(in, comm, CommOp::kAllGather, kF32 * ZeroShard(numel, dp) * dp);
    out.total_ms += g;
    out.exposed_ms += g;
  }
  return out;
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

// What the pipeline part of a step takes: compute, bubble and the sends between stages.
struct PipelineTime {
  double makespan = 0, compute = 0, bubble = 0;
  double sends = 0;  // sends on the critical path beside the makespan's compute (closed form)
};

// Megatron's (interleaved) 1F1B in closed form (Narayanan et al. 2021), for a described machine:
// m micro-batches through p stages of v virtual stages each. The slowest stage sets the pace and
// the pipeline fills and drains in (p - 1) / v of its micro-batch times; each of the v m chunks
// sends its activation forward and its gradient back over the pipeline's link, not overlapped.
// With equal stages, v = 1 and free sends it is the simulation's makespan and bubble
// ((m + p - 1) (f + b), (p - 1) / (m + p - 1)).
PipelineTime InterleavedClosedForm(const LayoutInput& in, const std::vector<double>& fwd,
                                   const std::vector<double>& bwd, double send_ms) {
  PipelineTime t;
  const double m = in.micros, fill = static_cast<double>(in.pp - 1) / in.interleave;
  double slowest = 0, busiest = 0;
  for (size_t s = 0; s < fwd.size(); ++s) {
    slowest = std::max(slowest, fwd[s] + bwd[s]);
    busiest = std::max(busiest, in.stages[s].fwd_ms + in.stages[s].bwd_ms);
  }
  t.sends = 2.0 * in.interleave * m * send_ms;
  t.makespan = (m + fill) * slowest + t.sends;
  t.bubble = fill / (m + fill);
  t.compute = m * busiest;
  return t;
}

// Forward and backward of all micro-batches on every stage: accumulation (pp = 1), the
// simulation of the executor's schedule, or a described machine's schedule in closed form.
// `fwd`/`bwd` per stage and micro-batch, with the tp collectives a described machine adds.
Result<PipelineTime> Pipeline(const LayoutInput& in, const std::vector<double>& fwd, const std::vector<double>& bwd,
                              double send_ms) {
  PipelineTime t;
  const int m = in.micros;
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
    t.makespan = t.compute = cold + (m - 1) * warm;
    // The tp collectives a described machine adds are communication, not compute.
    if (!s.tp_comm_in_compute) t.compute = t.makespan - m * s.tp_comm_ms;
    return t;
  }
  if (in.interleave > 0) return InterleavedClosedForm(in, fwd, bwd, send_ms);
  LS_ASSIGN_OR_RETURN(parallel::PipeSimulation sim, parallel::SimulatePipeline(in.schedule, m, fwd, bwd, send_ms));
  t.makespan = sim.makespan;
  t.bubble = sim.mean_bubble;
  t.compute = *std::max_element(sim.busy.begin(), sim.busy.end());
  // The stage times are a worker's share of a core while every worker computes; a stage
  // idling in the bubble leaves its core to the others (gpt-tiny dp=2,pp=4 on 8 threads and 2
  // cores: 111 ms predicted at the shared speed throughout, 62 measured).
  if (in.oversubscription > 1) t.makespan = SharedCoreMakespan(in, m, fwd, bwd, send_ms);
  return t;
}

}  // namespace

Result<Prediction> PredictLayout(const LayoutInput& in, const CommTable& comm) {
  if (in.stages.empty() || static_cast<int>(in.stages.size()) != in.pp || in.micros < 1 || in.dp < 1 || in.tp < 1 ||
      in.interleave < 0)
    return Status::InvalidArgument("PredictLayout: " + std::to_string(in.stages.size()) +
                                   " stages for pp=" + std::to_string(in.pp) + ", micros=" + std::to_string(in.micros) +
                                   ", interleave=" + std::to_string(in.interleave));
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
    send_ms = std::max(send_ms, s.described ? s.described->send_ms : SendMs(in, comm, s.send_bytes));
  }
  LS_ASSIGN_OR_RETURN(const PipelineTime pipe, Pipeline(in, fwd, bwd, send_ms));
  pr.pipeline_ms = pipe.makespan;
  pr.compute_ms = pipe.compute;
  pr.bubble = pipe.bubble;
  // After the pipeline: the stage that finishes last sets the step.
  double tail = 0, dp_exposed = 0;
  for (const StageCost& s : in.stages) {
    DpComm c;
    double opt = 0;
    if (s.described) {  // the framework's own schedule of collectives and its optimizer pass
      c.exposed_ms = c.total_ms = s.described->dp_exposed_ms;
      opt = s.described->optimizer_ms;
    } else {
      c = DataParallelComm(in, s, comm);
      const int64_t owned = in.zero >= 1 ? ZeroShard(s.numel(), in.dp) : s.numel();
      opt = in.optimizer_ns_per_element * static_cast<double>(owned) * 1e-6;
    }
    if (c.exposed_ms + opt >= tail) {
      tail = c.exposed_ms + opt;
      dp_exposed = c.exposed_ms;
      pr.optimizer_ms = opt;
    }
    pr.dp_bytes = std::max(pr.dp_bytes, c.bytes);
    const double sends = pipe.sends > 0 ? pipe.sends : 2.0 * m * send_ms;
    pr.comm_total_ms = std::max(pr.comm_total_ms, c.total_ms + m * s.tp_comm_ms + sends);
  }
  // Nothing overlaps them: each waits for every rank to finish its step. With workers sharing
  // the cores their latency is that of the slowest rank to be scheduled, which the measured
  // curve of the world group includes (cnn-fashion on 8 threads, 2 cores: ~0.12 ms each).
  const int world = in.dp * in.tp * in.pp;
  pr.step_sync_ms = comm.Ms(CommOp::kAllGather, world, in.step_stats_bytes * world, in.hosts.world_hosts);
  pr.comm_exposed_ms = dp_exposed + tp_ms + pr.step_sync_ms + pipe.sends;
  pr.comm_total_ms += pr.step_sync_ms;
  pr.step_ms = pr.pipeline_ms + tail + pr.step_sync_ms;
  return pr;
}

}  // namespace lockstep::planner
