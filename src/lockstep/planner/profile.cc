#include "lockstep/planner/profile.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>
#include <thread>

#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/core/clock.h"
#include "lockstep/nn/model.h"
#include "lockstep/optim/exact_square_sum.h"
#include "lockstep/optim/grad_clip.h"
#include "lockstep/parallel/gpt_shard.h"
#include "lockstep/parallel/stage_model.h"
#include "lockstep/parallel/zero_units.h"
#include "lockstep/runtime/training/optimizer_state.h"
#include "lockstep/tensor/bf16_ops.h"
#include "lockstep/tensor/memory.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::planner {
namespace {

using autograd::Variable;
using tensor::MemoryTag;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Inputs of one micro-batch: token ids, targets, images and labels from a fixed sequence.
struct Batch {
  std::vector<int32_t> tokens, targets, labels;
  std::vector<float> images;
  nn::ModelInput in;
};
Batch MakeBatch(int64_t rows, int64_t seq, int64_t vocab, int64_t image_floats) {
  Batch b;
  uint64_t s = 0x9e3779b97f4a7c15ull;
  auto next = [&] { return static_cast<uint32_t>((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33); };
  if (seq > 0) {
    b.tokens.resize(static_cast<size_t>(rows * seq));
    b.targets.resize(b.tokens.size());
    for (size_t i = 0; i < b.tokens.size(); ++i) {
      b.tokens[i] = static_cast<int32_t>(next() % vocab);
      b.targets[i] = static_cast<int32_t>(next() % vocab);
    }
    b.in.tokens = b.tokens.data();
    b.in.targets = b.targets.data();
  } else {
    b.images.resize(static_cast<size_t>(rows * image_floats));
    b.labels.resize(static_cast<size_t>(rows));
    for (float& x : b.images) x = static_cast<float>(next() % 256) / 255.0f;
    for (int32_t& l : b.labels) l = static_cast<int32_t>(next() % 10);
    b.in.features = b.images.data();
    b.in.labels = b.labels.data();
  }
  b.in.batch = rows;
  b.in.seq = seq > 0 ? seq : 1;
  return b;
}

// CPU time of the calling thread, in milliseconds.
double ThreadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

// One piece (a stage model) and its micro-batch: the first pass, on a fresh tape, gives its
// memory (what the forward leaves for the backward, the most it holds at once, and an
// evaluation pass without gradients); later passes are timed. The piece's input activation and
// the gradient arriving at its output belong to the neighbouring pieces, allocated before
// counting starts.
class PieceRun {
 public:
  PieceRun(parallel::StageModel* m, const nn::ModelInput* in) : m_(m), in_(in) {}

  // train.precision = bf16, as the trainer runs it: products in bf16 from the weights' bf16
  // copy (refreshed once, as after an optimizer step).
  parallel::StageModel* model() const { return m_; }
  void UseBf16() {
    bf16_ = true;
    nn::ParameterStore& ps = m_->params();
    if (tensor::UseNativeBf16() && ps.has_flat_params()) weights_.Refresh(ps.flat_params(), ps.numel());
  }

  // A timed forward whose activations are released at once, as recompute's forward runs
  // (PieceCost::recompute_fwd_ms), right after the piece's own pass.
  void ReleasedForward() {
    const tensor::ScopedPrecision precision(bf16_ ? tensor::Precision::kBF16 : tensor::ComputePrecision());
    const tensor::ScopedBf16Weights weights(bf16_ ? &weights_ : tensor::CurrentBf16Weights());
    const Variable x = StandInInput();
    Stopwatch clock;
    const double cpu0 = ThreadCpuMs();
    { Variable out = m_->Forward(tape_, *in_, x); }
    tape_.Clear();
    released_.fwd.push_back(clock.ElapsedMs());
    released_.fwd_cpu.push_back(ThreadCpuMs() - cpu0);
  }

  // `warm`: a timed pass run right after this piece's own previous pass (PieceCost::warm_fwd_ms).
  void Pass(tensor::MemoryTracker& mem, bool first_pass, bool warm = false) {
    const tensor::ScopedPrecision precision(bf16_ ? tensor::Precision::kBF16 : tensor::ComputePrecision());
    const tensor::ScopedBf16Weights weights(bf16_ ? &weights_ : tensor::CurrentBf16Weights());
    const bool last = m_->last_stage();
    const Variable x = StandInInput();
    tensor::Tensor grad;
    if (!last) {
      grad = tape_.NewBuffer(m_->ActivationShape(*in_));
      std::fill(grad.data<float>(), grad.data<float>() + grad.numel(), 1e-3f);
    }
    const int64_t before = mem.Current(MemoryTag::kActivation);
    const int64_t kernels_before = mem.Current(MemoryTag::kWorkspace);
    mem.ResetPeak();
    Stopwatch clock;
    const double cpu0 = ThreadCpuMs();
    Variable out = m_->Forward(tape_, *in_, x);
    const double f = clock.ElapsedMs(), cpu1 = ThreadCpuMs();
    const int64_t after = mem.Current(MemoryTag::kActivation);
    clock.Reset();
    if (last)
      tape_.Backward(out, 1.0f);
    else
      tape_.BackwardFrom(out, grad.data<float>());
    const double b = clock.ElapsedMs(), cpu2 = ThreadCpuMs();
    if (first_pass) {
      cost_.saved_bytes = after - before;
      cost_.peak_bytes = std::max(cost_.saved_bytes, mem.Peak(MemoryTag::kActivation) - before);
      MeasureEvaluation(mem);
      cost_.kernel_bytes = mem.Current(MemoryTag::kWorkspace) - kernels_before;  // plans made by both
    } else {
      Times& t = warm ? warm_ : cold_;
      t.fwd.push_back(f);
      t.bwd.push_back(b);
      t.fwd_cpu.push_back(cpu1 - cpu0);
      t.bwd_cpu.push_back(cpu2 - cpu1);
    }
  }

  // The median pass, as `train` reports the median step. `oversubscribed` > 1: more worker
  // threads than cores (MeasureOnWorker); then the piece's CPU time times that factor.
  PieceCost Cost(double oversubscribed) const {
    PieceCost c = cost_;
    c.fwd_ms = cold_.FwdMs(oversubscribed);
    c.bwd_ms = cold_.BwdMs(oversubscribed);
    c.warm_fwd_ms = warm_.FwdMs(oversubscribed);  // 0 when no warm pass ran
    c.warm_bwd_ms = warm_.BwdMs(oversubscribed);
    c.recompute_fwd_ms = released_.FwdMs(oversubscribed);  // 0 when none ran
    return c;
  }

 private:
  void MeasureEvaluation(tensor::MemoryTracker& mem) {
    const bool first = m_->first_stage(), last = m_->last_stage();
    const size_t n = static_cast<size_t>(tensor::NumElements(m_->ActivationShape(*in_)));
    std::vector<float> x_in(first ? 0 : n), x_out(last ? 0 : n);
    const int64_t before = mem.Current(MemoryTag::kActivation);
    mem.ResetPeak();
    m_->Evaluate(*in_, first ? nullptr : x_in.data(), last ? nullptr : x_out.data());
    cost_.eval_peak_bytes = mem.Peak(MemoryTag::kActivation) - before;
  }

  // A received activation's stand-in on this piece's tape (none for the first stage).
  Variable StandInInput() {
    if (m_->first_stage()) return Variable();
    Variable x = tape_.NewActivation(m_->ActivationShape(*in_), true);
    float* p = x.data();
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = 0.01f * static_cast<float>((i * 7919) % 201 - 100);
    return x;
  }

  parallel::StageModel* m_;
  const nn::ModelInput* in_;
  bool bf16_ = false;
  tensor::Bf16WeightCopy weights_;
  autograd::Tape tape_;
  // Timed passes: wall and this thread's CPU milliseconds.
  struct Times {
    std::vector<double> fwd, bwd, fwd_cpu, bwd_cpu;
    double FwdMs(double oversubscribed) const {
      return oversubscribed > 1 ? Median(fwd_cpu) * oversubscribed : Median(fwd);
    }
    double BwdMs(double oversubscribed) const {
      return oversubscribed > 1 ? Median(bwd_cpu) * oversubscribed : Median(bwd);
    }
  };
  PieceCost cost_;
  Times cold_, warm_, released_;
};

// Norm, clip and update over `n` elements of a one-tensor store, per element. `oversubscribed` > 1: the thread's CPU
// time stretched by it, as the pieces' (PieceRun::Cost): the optimizer runs on every worker at
// once (gpt-tiny on 8 workers, 2 cores, ZeRO-1: 3.6 ms a step trained; the wall time measured
// while the other workers were finishing their passes predicted 1.3).
double OptimizerNsPerElement(const optim::OptimConfig& cfg, int64_t n, int reps, double oversubscribed) {
  nn::ParameterStore ps;
  ps.Add("w", {n}, nn::Init::Zeros(), true);
  ps.Allocate();
  std::fill(ps.flat_grads(), ps.flat_grads() + n, 1e-3f);
  Result<runtime::OptimizerState> opt = runtime::OptimizerState::Create(cfg, ps, {0, n});
  if (!opt.ok()) return 0;
  std::vector<double> ns;
  for (int rep = 0; rep <= reps; ++rep) {
    Stopwatch clock;
    const double cpu0 = ThreadCpuMs();
    optim::ExactSquareSum sum;
    sum.Add(ps.flat_grads(), n);
    const double norm = optim::NormOf(sum);
    opt->Step(ps.flat_params(), ps.flat_grads(), 1e-3f, optim::ClipFactor(1.0, norm));  // as the trainer clips
    const double ms = oversubscribed > 1 ? (ThreadCpuMs() - cpu0) * oversubscribed : clock.ElapsedMs();
    if (rep > 0) ns.push_back(ms * 1e6 / static_cast<double>(n));
  }
  return Median(ns);
}

parallel::GptShardOptions PieceOptions(const nn::GptConfig& c, int piece) {
  parallel::GptShardOptions o;
  o.model = c;
  o.first_layer = 0;
  o.end_layer = piece == 1 ? 1 : 0;
  o.has_embedding = piece == 0;
  o.has_head = piece == 2;
  return o;
}

// What ZeRO stages 2 and 3 add to a piece in a step on this machine, in ns per micro-batch and
// parameter element: the piece (a GPT block, or a whole model) built as each stage builds it,
// one unit over `dp` (every worker of the profile), forward + backward + the step's final
// wait, against the plain piece (`plain`) in the same loop, passes interleaved so that load
// from elsewhere hits all three alike. The threads backend's collectives run on the cores that
// compute: gpt-tiny on two workers, micro-batch 4, trained 8-16 ms slower a step under ZeRO-3
// than ZeRO-0, while the collectives' curves, overlapped with backward as if on a network of
// their own, predicted 1 ms.
// `micros` passes make a step (1 in the profile; kZeroOverlapMicros for the overlap figure), and
// the figure is per micro-batch. `plain_ms`: the plain passes' median, per micro-batch.
Status MeasureZero(const ProfileRequest& req, const nn::ModelInput* in, parallel::TpContext* tp,
                   std::shared_ptr<comm::Communicator> dp, tensor::MemoryTracker& mem, PieceRun& plain,
                   double (&out)[2], int micros = 1, double* plain_ms = nullptr) {
  std::unique_ptr<parallel::StageModel> models[2];
  std::unique_ptr<parallel::ZeroUnits> zeros[2];
  std::unique_ptr<PieceRun> runs[2];
  for (int k = 0; k < 2; ++k) {
    const int stage = 2 + k;
    if (req.gpt) {
      parallel::GptShardOptions o = PieceOptions(*req.gpt, 1);
      o.flat_params = stage != 3;
      o.flat_grads = false;
      LS_ASSIGN_OR_RETURN(std::unique_ptr<parallel::GptShard> shard, parallel::GptShard::Create(o, tp));
      models[k] = std::move(shard);
    } else {
      LS_ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> m, nn::MakeModel(req.config));
      models[k] = std::make_unique<parallel::WholeModel>(std::move(m));
      models[k]->params().DetachStorage(stage == 3, true);
    }
    LS_ASSIGN_OR_RETURN(zeros[k], parallel::ZeroUnits::Create(stage, dp, models[k].get(), 0));
    runs[k] = std::make_unique<PieceRun>(models[k].get(), in);
  }
  std::vector<double> ms[3];
  const int reps = std::max(req.reps, 7);
  // The plain pass ends, as the ZeRO passes' FinishStep does, by waiting for every worker: a
  // pass differs between workers by a few percent, and without the barrier that wait was
  // charged to ZeRO (the cost grew with the rows: gpt-tiny ZeRO-2 1.8-7.1 ns per element from 2
  // to 16 rows, gpt-small 2-11, where trained ZeRO-2 was no slower than ZeRO-1).
  for (int pass = 0; pass <= reps; ++pass) {
    LS_RETURN_IF_ERROR(dp->Barrier()->Wait());
    Stopwatch clock;
    for (int micro = 0; micro < micros; ++micro) plain.Pass(mem, false);
    LS_RETURN_IF_ERROR(dp->Barrier()->Wait());
    if (pass > 0) ms[2].push_back(clock.ElapsedMs());
    for (int k = 0; k < 2; ++k) {
      clock.Reset();
      zeros[k]->BeginStep();
      for (int micro = 0; micro < micros; ++micro) runs[k]->Pass(mem, false);  // only the time counts
      LS_RETURN_IF_ERROR(zeros[k]->FinishStep());
      if (pass > 0) ms[k].push_back(clock.ElapsedMs());
    }
  }
  // The median of the passes' paired differences: a burst of load hits a pass and its plain
  // neighbour alike (the difference of the two medians swung 0.1-10x between runs).
  const double numel = static_cast<double>(models[0]->params().numel());
  for (int k = 0; k < 2; ++k) {
    std::vector<double> extra;
    for (size_t i = 0; i < ms[2].size(); ++i) extra.push_back((ms[k][i] - ms[2][i]) / micros);
    // A measured cost is never 0 (0: not measured).
    out[k] = numel > 0 ? std::max(1e-6, Median(extra) * 1e6 / numel) : 0.0;
  }
  if (plain_ms != nullptr) *plain_ms = Median(ms[2]) / micros;
  return Status::Ok();
}

// More single-threaded workers than cores: the share of a core each gets while all compute
// (PieceRun::Cost). 1 when every worker has a core, or runs several threads.
double Oversubscription(int workers, int threads_per_worker) {
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  return threads_per_worker == 1 ? std::max(1.0, static_cast<double>(workers) / cores) : 1.0;
}
double Oversubscription(const ProfileRequest& req) { return Oversubscription(req.workers, req.threads_per_worker); }

// What one worker thread measured: per rows, the GPT's three pieces or the whole model.
struct WorkerResult {
  Status status;
  std::vector<GptPieceCosts> gpt;
  std::vector<PieceCost> whole;
  double optimizer_ns = 0;
  // Each timed pass from the line-up to this worker's end: wall and this thread's CPU time
  // (SharingLoss).
  std::vector<double> pass_wall_ms, pass_cpu_ms;
};

// The workers of one MeasureCompute line-up: the slowest one's first timed pass, offered by
// each, from which all take the same number of passes (TimedPasses).
struct PassCount {
  std::atomic<int64_t> first_us{0};  // the slowest worker's first timed pass
  void Offer(double ms) {
    const auto us = static_cast<int64_t>(ms * 1e3);
    int64_t seen = first_us.load();
    while (us > seen && !first_us.compare_exchange_weak(seen, us)) {}
  }
  int Passes(int at_least) const { return TimedPasses(static_cast<double>(first_us.load()) * 1e-3, at_least); }
};

// One worker of a tp group: every rows value of `rows` at this tp degree. The timed passes go
// round all of them in turn, so a burst of load from other processes hits every shape alike.
// `passes` lines the workers up at the start of every pass, as a training step's gradient
// synchronisation does, so they compute at the same time: unaligned, a worker set up faster
// than the others timed its pieces while they were still building their models.
WorkerResult MeasureOnWorker(const ProfileRequest& req, int tp_degree, const std::vector<int64_t>& rows,
                             std::shared_ptr<comm::Communicator> tp, std::shared_ptr<comm::Communicator> dp,
                             bool optimizer, std::barrier<>* passes, PassCount* count) {
  WorkerResult r;
  // A worker that stops early leaves the line-up, so the others do not wait for it.
  struct Leave {
    std::barrier<>* b;
    int left;
    ~Leave() {
      if (left > 0) b->arrive_and_drop();
    }
  } leave{passes, 2 * (req.reps + 1) + (optimizer ? 1 : 0)};
  tensor::MemoryTracker mem;
  tensor::ScopedTracker scope(&mem);
  tensor::SetComputeThreads(req.threads_per_worker);
  parallel::TpContext ctx(tp, tp_degree, false);
  std::vector<std::unique_ptr<Batch>> batches;
  std::vector<std::unique_ptr<parallel::StageModel>> models;
  std::vector<std::unique_ptr<PieceRun>> runs;
  for (int64_t n : rows) {
    if (req.gpt) {
      const nn::GptConfig& c = *req.gpt;
      batches.push_back(std::make_unique<Batch>(MakeBatch(n, c.context, c.vocab, 0)));
      for (int piece = 0; piece < 3; ++piece) {
        Result<std::unique_ptr<parallel::GptShard>> shard = parallel::GptShard::Create(PieceOptions(c, piece), &ctx);
        if (!shard.ok()) {
          r.status = shard.status();
          return r;
        }
        models.push_back(std::move(*shard));
        runs.push_back(std::make_unique<PieceRun>(models.back().get(), &batches.back()->in));
      }
    } else {
      Result<std::unique_ptr<nn::Model>> model = nn::MakeModel(req.config);
      if (!model.ok()) {
        r.status = model.status();
        return r;
      }
      batches.push_back(std::make_unique<Batch>(MakeBatch(n, 0, 0, 28 * 28)));
      models.push_back(std::make_unique<parallel::WholeModel>(std::move(*model)));
      runs.push_back(std::make_unique<PieceRun>(models.back().get(), &batches.back()->in));
    }
  }
  // Every pass of `list` lines up with the other workers' (their fp32 passes, then their bf16
  // ones); `timed` keeps each timed pass's wall and CPU time for SharingLoss.
  // The number of timed passes is settled at the second one's line-up, when every worker has
  // offered its first (all read the same figure: nothing is offered after it).
  int reps = req.reps;
  bool settled = false;
  auto run_passes = [&](std::vector<std::unique_ptr<PieceRun>>& list, bool timed) {
    for (int pass = 0; pass <= reps; ++pass) {
      passes->arrive_and_wait();
      --leave.left;
      if (pass == 2 && !settled) {
        settled = true;
        reps = count->Passes(req.reps);
        leave.left += 2 * (reps - req.reps);  // both precisions' passes
      }
      Stopwatch wall;
      const double cpu = ThreadCpuMs();
      for (auto& run : list) {
        run->Pass(mem, pass == 0);
        if (!ctx.status().ok()) return false;
        // A whole model's pass again at once, as a step's further micro-batches run it
        // (PieceCost::warm_fwd_ms); the first pass above follows the other shapes' models.
        if (!req.gpt && pass > 0) run->Pass(mem, false, true);
        // A block's forward as recompute runs it (PieceCost::recompute_fwd_ms).
        if (req.gpt && pass > 0 && !run->model()->first_stage() && !run->model()->last_stage()) run->ReleasedForward();
      }
      if (timed && pass > 0) {
        r.pass_wall_ms.push_back(wall.ElapsedMs());
        r.pass_cpu_ms.push_back(ThreadCpuMs() - cpu);
      }
      if (pass == 1 && !settled) count->Offer(wall.ElapsedMs());
    }
    return true;
  };
  // train.precision = bf16: the piece that carries the products (the block, or the whole
  // model) again, on its own tape, in the same line-up of passes.
  std::vector<std::unique_ptr<PieceRun>> bf16_runs;
  for (size_t i = 0; i < rows.size(); ++i) {
    bf16_runs.push_back(std::make_unique<PieceRun>(runs[req.gpt ? 3 * i + 1 : i]->model(), &batches[i]->in));
    bf16_runs.back()->UseBf16();
  }
  if (!run_passes(runs, true) || !run_passes(bf16_runs, false)) {
    r.status = ctx.status();
    return r;
  }
  // More single-threaded workers than cores: a piece shorter than the scheduler's time slice
  // either runs alone or waits most of its time, so its wall times are bimodal and their median
  // is the alone one (gpt-tiny, 4 workers on 2 cores: predicted 21 ms a step, trained in 42).
  // In a training step every worker computes at once for the whole step and gets cores/workers
  // of a core: the piece's own CPU time stretched by that. (Multi-threaded workers keep wall
  // times: their OpenMP threads' CPU time is not this thread's.)
  const double oversubscribed = Oversubscription(req);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (req.gpt)
      r.gpt.push_back({runs[3 * i]->Cost(oversubscribed), runs[3 * i + 1]->Cost(oversubscribed),
                       runs[3 * i + 2]->Cost(oversubscribed)});
    else
      r.whole.push_back(runs[i]->Cost(oversubscribed));
    PieceCost& main = req.gpt ? r.gpt.back().block : r.whole.back();
    const PieceCost b = bf16_runs[i]->Cost(oversubscribed);
    main.bf16_fwd_ms = b.fwd_ms;
    main.bf16_bwd_ms = b.bwd_ms;
    main.bf16_warm_fwd_ms = b.warm_fwd_ms;
    main.bf16_warm_bwd_ms = b.warm_bwd_ms;
    main.bf16_recompute_fwd_ms = b.recompute_fwd_ms;
    main.bf16_saved_bytes = b.saved_bytes;
    main.bf16_peak_bytes = b.peak_bytes;
    main.bf16_kernel_bytes = b.kernel_bytes;  // made by the bf16 passes, beside the fp32 plans
    if (!dp || !req.zero) continue;
    PieceRun& plain = req.gpt ? *runs[3 * i + 1] : *runs[i];
    r.status = MeasureZero(req, &batches[i]->in, &ctx, dp, mem, plain,
                           (req.gpt ? r.gpt.back().block : r.whole.back()).zero_ns_per_element);
    if (!r.status.ok()) return r;
  }
  if (optimizer) {
    passes->arrive_and_wait();  // every worker's update at once, as in a step (they share the memory bus)
    --leave.left;
    r.optimizer_ns = OptimizerNsPerElement(req.optim, req.optimizer_elements, req.reps, oversubscribed);
  }
  return r;
}

// A piece's measured times: what MedianOf takes the median of and SharingLoss stretches.
constexpr double PieceCost::*kPieceTimes[] = {&PieceCost::fwd_ms,           &PieceCost::bwd_ms,
                                              &PieceCost::bf16_fwd_ms,      &PieceCost::bf16_bwd_ms,
                                              &PieceCost::warm_fwd_ms,      &PieceCost::warm_bwd_ms,
                                              &PieceCost::bf16_warm_fwd_ms, &PieceCost::bf16_warm_bwd_ms,
                                              &PieceCost::recompute_fwd_ms, &PieceCost::bf16_recompute_fwd_ms};

// Every time of a piece (kPieceTimes) times f: SharingLoss's stretch, the second look's ratio.
void ScalePieceTimes(PieceCost& c, double f) {
  for (double PieceCost::*t : kPieceTimes) c.*t *= f;
}

PieceCost MedianOf(const std::vector<PieceCost>& v) {
  PieceCost out;
  for (double PieceCost::*t : kPieceTimes) {
    std::vector<double> times;
    for (const PieceCost& c : v) times.push_back(c.*t);
    out.*t = Median(times);
  }
  for (const PieceCost& c : v) {
    out.bf16_saved_bytes = std::max(out.bf16_saved_bytes, c.bf16_saved_bytes);
    out.bf16_peak_bytes = std::max(out.bf16_peak_bytes, c.bf16_peak_bytes);
    out.bf16_kernel_bytes = std::max(out.bf16_kernel_bytes, c.bf16_kernel_bytes);
    out.saved_bytes = std::max(out.saved_bytes, c.saved_bytes);
    out.peak_bytes = std::max(out.peak_bytes, c.peak_bytes);
    out.eval_peak_bytes = std::max(out.eval_peak_bytes, c.eval_peak_bytes);
    out.kernel_bytes = std::max(out.kernel_bytes, c.kernel_bytes);
  }
  for (int k = 0; k < 2; ++k) {
    std::vector<double> z;
    for (const PieceCost& c : v) z.push_back(c.zero_ns_per_element[k]);
    out.zero_ns_per_element[k] = Median(z);
  }
  return out;
}

nlohmann::json PieceJson(const PieceCost& c) {
  return {{"fwd_ms", c.fwd_ms},
          {"bwd_ms", c.bwd_ms},
          {"saved_bytes", c.saved_bytes},
          {"peak_bytes", c.peak_bytes},
          {"eval_peak_bytes", c.eval_peak_bytes},
          {"kernel_bytes", c.kernel_bytes},
          {"zero2_ns_per_element", c.zero_ns_per_element[0]},
          {"zero3_ns_per_element", c.zero_ns_per_element[1]},
          {"bf16_fwd_ms", c.bf16_fwd_ms},
          {"bf16_bwd_ms", c.bf16_bwd_ms},
          {"warm_fwd_ms", c.warm_fwd_ms},
          {"warm_bwd_ms", c.warm_bwd_ms},
          {"bf16_warm_fwd_ms", c.bf16_warm_fwd_ms},
          {"bf16_warm_bwd_ms", c.bf16_warm_bwd_ms},
          {"recompute_fwd_ms", c.recompute_fwd_ms},
          {"bf16_recompute_fwd_ms", c.bf16_recompute_fwd_ms},
          {"bf16_saved_bytes", c.bf16_saved_bytes},
          {"bf16_peak_bytes", c.bf16_peak_bytes},
          {"bf16_kernel_bytes", c.bf16_kernel_bytes}};
}
PieceCost PieceFromJson(const nlohmann::json& j) {
  PieceCost c;
  c.fwd_ms = j.at("fwd_ms").get<double>();
  c.bwd_ms = j.at("bwd_ms").get<double>();
  c.saved_bytes = j.at("saved_bytes").get<int64_t>();
  c.peak_bytes = j.at("peak_bytes").get<int64_t>();
  c.eval_peak_bytes = j.at("eval_peak_bytes").get<int64_t>();
  c.kernel_bytes = j.at("kernel_bytes").get<int64_t>();
  c.warm_fwd_ms = j.value("warm_fwd_ms", 0.0);
  c.warm_bwd_ms = j.value("warm_bwd_ms", 0.0);
  c.bf16_warm_fwd_ms = j.value("bf16_warm_fwd_ms", 0.0);
  c.bf16_warm_bwd_ms = j.value("bf16_warm_bwd_ms", 0.0);
  c.recompute_fwd_ms = j.value("recompute_fwd_ms", 0.0);
  c.bf16_recompute_fwd_ms = j.value("bf16_recompute_fwd_ms", 0.0);
  c.zero_ns_per_element[0] = j.value("zero2_ns_per_element", 0.0);
  c.zero_ns_per_element[1] = j.value("zero3_ns_per_element", 0.0);
  c.bf16_fwd_ms = j.value("bf16_fwd_ms", 0.0);
  c.bf16_bwd_ms = j.value("bf16_bwd_ms", 0.0);
  c.bf16_saved_bytes = j.value("bf16_saved_bytes", int64_t{0});
  c.bf16_peak_bytes = j.value("bf16_peak_bytes", int64_t{0});
  c.bf16_kernel_bytes = j.value("bf16_kernel_bytes", int64_t{0});
  return c;
}

}  // namespace

// ZeRO's cost per micro-batch and element is the collectives' work on the unit, whatever the
// rows: each shape's measurement (a median of a few paired differences, noisy where the pass is
// long beside the cost) is replaced by the median over the shapes measured together.
// gpt-tiny on 2 workers, rows 2-16, two profiles: ZeRO-2 0.1-2.7 ns per element, ZeRO-3 1.5-12.6.
void PoolZeroCosts(const std::vector<int64_t>& rows, const std::function<PieceCost*(int64_t)>& piece) {
  for (int k = 0; k < 2; ++k) {
    std::vector<double> v;
    for (int64_t n : rows)
      if (piece(n)->zero_ns_per_element[k] > 0) v.push_back(piece(n)->zero_ns_per_element[k]);
    if (v.empty()) continue;
    const double pooled = Median(v);
    for (int64_t n : rows) piece(n)->zero_ns_per_element[k] = pooled;
  }
}

int TimedPasses(double first_pass_ms, int at_least) {
  // A small model's pass takes milliseconds, and five of them gave cnn-fashion's plans on 4
  // threads (2 cores) a step 8.2-9.4 ms apart (ZeRO-0, one micro-batch, five plans in a row: sd
  // 0.50 ms; 21 passes: sd 0.33, for 2 s more a plan); a GPT block's passes are long enough.
  constexpr double kBudgetMs = 1500;
  constexpr int kMost = 21;
  if (!(first_pass_ms > 0)) return at_least;
  const int fit = static_cast<int>(std::min<double>(kMost, kBudgetMs / first_pass_ms));
  return std::max(at_least, fit);
}

double SharingLoss(const std::vector<std::vector<double>>& pass_wall_ms,
                   const std::vector<std::vector<double>>& pass_cpu_ms, double oversubscribed) {
  if (oversubscribed <= 1 || pass_wall_ms.empty() || pass_wall_ms.size() != pass_cpu_ms.size()) return 1.0;
  std::vector<double> loss;
  for (size_t p = 0; p < pass_wall_ms[0].size(); ++p) {
    double slowest = 0, cpu = 0;
    for (size_t w = 0; w < pass_wall_ms.size(); ++w) {
      if (p >= pass_wall_ms[w].size() || p >= pass_cpu_ms[w].size()) return 1.0;
      slowest = std::max(slowest, pass_wall_ms[w][p]);
      cpu += pass_cpu_ms[w][p];
    }
    cpu /= static_cast<double>(pass_wall_ms.size());
    if (cpu > 0) loss.push_back(slowest / (cpu * oversubscribed));
  }
  return loss.empty() ? 1.0 : std::max(1.0, Median(loss));
}

Status MeasureCompute(const ProfileRequest& req, ComputeProfile* into) {
  into->workers = req.workers;
  into->threads_per_worker = req.threads_per_worker;
  bool optimizer = into->optimizer_ns_per_element <= 0 && req.optimizer_elements > 0;
  std::vector<ShapeKey> todo;
  for (const ShapeKey& k : req.shapes)
    if (!into->Has(k, req.gpt.has_value()) && std::find(todo.begin(), todo.end(), k) == todo.end()) todo.push_back(k);
  if (todo.empty() && optimizer) todo.push_back(req.shapes.empty() ? ShapeKey{1, 1} : req.shapes.front());
  // Shapes by tp degree: one set of worker threads per degree.
  std::map<int, std::vector<int64_t>> by_tp;
  for (const ShapeKey& k : todo) by_tp[req.gpt ? k.second : 1].push_back(k.first);
  for (const auto& [tp, rows] : by_tp) {
    // All workers at once: workers / tp groups of tp threads (tp = 1: independent workers).
    const int groups = std::max(1, req.workers / tp);
    std::vector<std::unique_ptr<comm::ThreadsWorld>> worlds;
    for (int g = 0; g < groups; ++g) worlds.push_back(std::make_unique<comm::ThreadsWorld>(tp));
    std::vector<WorkerResult> results(static_cast<size_t>(groups * tp));
    std::barrier<> passes(groups * tp);
    PassCount count;
    // Independent workers also form one data-parallel group, to measure ZeRO-2/3 over it.
    std::unique_ptr<comm::ThreadsWorld> dp_world;
    if (tp == 1 && groups > 1) dp_world = std::make_unique<comm::ThreadsWorld>(groups);
    std::vector<std::thread> threads;
    for (int g = 0; g < groups; ++g)
      for (int t = 0; t < tp; ++t)
        threads.emplace_back([&, g, t, tp = tp] {
          results[static_cast<size_t>(g * tp + t)] = MeasureOnWorker(
              req, tp, rows, worlds[g]->Rank(t), dp_world ? dp_world->Rank(g) : nullptr, optimizer, &passes, &count);
        });
    for (std::thread& t : threads) t.join();
    for (const WorkerResult& r : results)
      if (!r.status.ok()) return r.status;
    // Measured 1.00-1.02 with tp = 1 and 1.05-1.10 with tp = 2 or 4 (gpt-tiny, 4 and 8 workers
    // on 2 cores), where the tp rows trained 6-16% slower than predicted without it.
    std::vector<std::vector<double>> wall, cpu;
    for (const WorkerResult& r : results) {
      wall.push_back(r.pass_wall_ms);
      cpu.push_back(r.pass_cpu_ms);
    }
    const double stretch = SharingLoss(wall, cpu, Oversubscription(req));
    for (size_t i = 0; i < rows.size(); ++i) {
      std::vector<PieceCost> emb, block, head, whole;
      auto add = [stretch](std::vector<PieceCost>& to, PieceCost c) {
        ScalePieceTimes(c, stretch);
        to.push_back(c);
      };
      for (const WorkerResult& r : results) {
        if (req.gpt) {
          add(emb, r.gpt[i].embedding);
          add(block, r.gpt[i].block);
          add(head, r.gpt[i].head);
        } else {
          add(whole, r.whole[i]);
        }
      }
      if (req.gpt)
        into->gpt[{rows[i], tp}] = {MedianOf(emb), MedianOf(block), MedianOf(head)};
      else
        into->whole[rows[i]] = MedianOf(whole);
    }
    if (dp_world) {
      PoolZeroCosts(rows, [&, tp = tp](int64_t n) { return req.gpt ? &into->gpt[{n, tp}].block : &into->whole[n]; });
    }
    if (optimizer) {
      std::vector<double> opt;
      for (const WorkerResult& r : results) opt.push_back(r.optimizer_ns);
      into->optimizer_ns_per_element = Median(opt);
      optimizer = false;
    }
  }
  return Status::Ok();
}

void ComputeProfile::ScaleTimes(double f) {
  for (auto& [key, costs] : gpt)
    for (PieceCost* c : {&costs.embedding, &costs.block, &costs.head}) ScalePieceTimes(*c, f);
  for (auto& [rows, cost] : whole) ScalePieceTimes(cost, f);
  optimizer_ns_per_element *= f;
}

double ComputeProfile::oversubscription() const { return Oversubscription(workers, threads_per_worker); }

nlohmann::json ComputeProfile::ToJson() const {
  nlohmann::json g = nlohmann::json::array(), w = nlohmann::json::array();
  for (const auto& [k, c] : gpt)
    g.push_back({{"rows", k.first},
                 {"tp", k.second},
                 {"embedding", PieceJson(c.embedding)},
                 {"block", PieceJson(c.block)},
                 {"head", PieceJson(c.head)}});
  for (const auto& [rows, c] : whole) w.push_back({{"rows", rows}, {"model", PieceJson(c)}});
  return {{"workers", workers},
          {"threads_per_worker", threads_per_worker},
          {"optimizer_ns_per_element", optimizer_ns_per_element},
          {"gpt", g},
          {"whole", w}};
}

Result<ComputeProfile> ComputeProfile::FromJson(const nlohmann::json& j) {
  try {
    ComputeProfile p;
    p.workers = j.at("workers").get<int>();
    p.threads_per_worker = j.at("threads_per_worker").get<int>();
    p.optimizer_ns_per_element = j.at("optimizer_ns_per_element").get<double>();
    for (const nlohmann::json& e : j.at("gpt"))
      p.gpt[{e.at("rows").get<int64_t>(), e.at("tp").get<int>()}] = {
          PieceFromJson(e.at("embedding")), PieceFromJson(e.at("block")), PieceFromJson(e.at("head"))};
    for (const nlohmann::json& e : j.at("whole")) p.whole[e.at("rows").get<int64_t>()] = PieceFromJson(e.at("model"));
    return p;
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("plan profile cache: ") + e.what());
  }
}

Result<ZeroProbe> MeasureZeroOverRanks(const ProfileRequest& req, const std::vector<int64_t>& rows,
                                       std::shared_ptr<comm::Communicator> dp) {
  tensor::MemoryTracker mem;
  tensor::ScopedTracker scope(&mem);
  tensor::ScopedComputeThreads threads(req.threads_per_worker);
  comm::ThreadsWorld tp_world(1);
  parallel::TpContext ctx(tp_world.Rank(0), 1, false);
  std::map<int64_t, PieceCost> one, overlap;  // a step of one micro-batch, of kZeroOverlapMicros
  std::vector<int64_t> measured;
  double plain_ms = 0;
  Stopwatch spent;
  for (int64_t n : rows) {
    // The figure is per element, the same work at any rows, so after ~10 s the larger shapes are
    // left out (gpt-small on 2 processes: ~90 s for rows 1, 2 and 4). Every rank stops together.
    int64_t over = spent.ElapsedMs() > 10'000 ? 1 : 0;
    LS_RETURN_IF_ERROR(dp->Allreduce(&over, &over, 1, comm::DType::kI64, comm::ReduceOp::kMax)->Wait());
    if (over) break;
    measured.push_back(n);
    Batch batch = req.gpt ? MakeBatch(n, req.gpt->context, req.gpt->vocab, 0) : MakeBatch(n, 0, 0, 28 * 28);
    std::unique_ptr<parallel::StageModel> model;
    if (req.gpt) {
      LS_ASSIGN_OR_RETURN(model, parallel::GptShard::Create(PieceOptions(*req.gpt, 1), &ctx));
    } else {
      LS_ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> m, nn::MakeModel(req.config));
      model = std::make_unique<parallel::WholeModel>(std::move(m));
    }
    PieceRun plain(model.get(), &batch.in);
    plain.Pass(mem, true);  // the piece's first pass (plans made, buffers pooled), as MeasureOnWorker's
    // As many passes as fit about 2 s a shape (at least req.reps, at most 41): on ranks sharing
    // cores a pass's ZeRO cost comes in time slices, and the median of a few is noisy (ZeRO-2 on
    // cnn-fashion, 4 processes on 2 cores, 11 passes: 0-21 ns an element over three plans).
    Stopwatch clock;
    plain.Pass(mem, false);
    ProfileRequest r = req;
    const double step_ms = 3 * kZeroOverlapMicros * std::max(clock.ElapsedMs(), 0.01);
    int64_t reps = std::clamp(static_cast<int>(2000.0 / step_ms), req.reps, 41);
    // Every rank runs the same passes (they are collectives): the fewest any rank chose.
    LS_RETURN_IF_ERROR(dp->Allreduce(&reps, &reps, 1, comm::DType::kI64, comm::ReduceOp::kMin)->Wait());
    r.reps = static_cast<int>(reps);
    LS_RETURN_IF_ERROR(MeasureZero(r, &batch.in, &ctx, dp, mem, plain, one[n].zero_ns_per_element, 1,
                                   measured.size() == 1 ? &plain_ms : nullptr));
    LS_RETURN_IF_ERROR(
        MeasureZero(r, &batch.in, &ctx, dp, mem, plain, overlap[n].zero_ns_per_element, kZeroOverlapMicros));
  }
  if (measured.empty()) return ZeroProbe{};
  PoolZeroCosts(measured, [&](int64_t n) { return &one[n]; });
  PoolZeroCosts(measured, [&](int64_t n) { return &overlap[n]; });
  const double* a = one[measured.front()].zero_ns_per_element;
  const double* b = overlap[measured.front()].zero_ns_per_element;
  return ZeroProbe{{a[0], a[1], b[0], b[1]}, measured.front(), plain_ms};
}

}  // namespace lockstep::planner
