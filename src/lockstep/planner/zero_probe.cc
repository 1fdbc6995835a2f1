// The ZeRO probe of `lockstep plan`: what ZeRO-2 and ZeRO-3 add to a piece's step on this
// machine, per micro-batch and parameter element, measured over ranks (docs/planning.md,
// section 1): on the profile's worker threads (MeasureCompute) and over the plan's own workers
// as its backend runs them (MeasureZeroOverRanks, RunPlan's ZeRO probe).
#include <algorithm>
#include <map>

#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/core/clock.h"
#include "lockstep/nn/model.h"
#include "lockstep/parallel/zero_units.h"
#include "lockstep/planner/piece_run.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::planner {
namespace probe {

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
                   double (&out)[2], int micros, double* plain_ms) {
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

}  // namespace probe

using probe::Batch;
using probe::MakeBatch;
using probe::WholeModelBatch;
using probe::MeasureZero;
using probe::PieceOptions;
using probe::PieceRun;
using probe::PoolZeroCosts;

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
    LS_ASSIGN_OR_RETURN(Batch batch, req.gpt ? Result<Batch>(MakeBatch(n, req.gpt->context, req.gpt->vocab, 0))
                                             : WholeModelBatch(req.config, n));
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
