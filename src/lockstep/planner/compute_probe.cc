// The compute probe of `lockstep plan` (profile.h): every piece of the model at every shape the
// layouts need, run on the plan's worker threads lined up as a step lines them up, with the
// optimizer's pass per element; the medians over the workers make the ComputeProfile.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <map>
#include <thread>

#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/core/clock.h"
#include "lockstep/nn/model.h"
#include "lockstep/optim/exact_square_sum.h"
#include "lockstep/optim/grad_clip.h"
#include "lockstep/planner/piece_run.h"
#include "lockstep/runtime/training/optimizer_state.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::planner {
namespace {

using probe::Batch;
using probe::MakeBatch;
using probe::WholeModelBatch;
using probe::MeasureZero;
using probe::Median;
using probe::Oversubscription;
using probe::PieceOptions;
using probe::PieceRun;
using probe::PoolZeroCosts;
using probe::ThreadCpuMs;

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
      Result<Batch> batch = WholeModelBatch(req.config, n);
      if (!batch.ok()) {
        r.status = batch.status();
        return r;
      }
      batches.push_back(std::make_unique<Batch>(std::move(*batch)));
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

}  // namespace

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

}  // namespace lockstep::planner
