// BuildLayoutInput: a candidate layout's stages composed from the profiled pieces.
#include "lockstep/planner/planner.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/parallel/powersgd.h"
#include "lockstep/runtime/metrics/step_stats.h"

namespace lockstep::planner {

int64_t EvalRows(const Candidate& c, const PlanSetup& s) {
  const int64_t batch = s.run.data.eval_batch_size > 0 ? s.run.data.eval_batch_size : s.run.train.batch_size;
  return std::max<int64_t>(1, (batch + c.dims.dp - 1) / c.dims.dp);
}

namespace {

// The unsharded block that carries a ZeRO figure (pooled over its rows: any one), or null.
const PieceCost* UnshardedZeroBlock(const ComputeProfile& profile, int k) {
  for (const auto& [key, costs] : profile.gpt)
    if (key.second == 1 && costs.block.zero_ns_per_element[k] > 0) return &costs.block;
  return nullptr;
}

// Bytes of a [rows, T, C] fp32 activation: a block's input, output and most of its buffers.
int64_t BlockActivationBytes(const PlanSetup& s, int64_t rows) { return 4 * rows * s.gpt->context * s.gpt->width; }

// The factorisation of one step on one worker, timed here on this machine (the planner's
// profile does not hold it): PowerSgd::Reduce over one rank, once to warm and once timed, per
// rank r and parameter shapes. Workers that share cores take their share of one.
double MeasureCompressMs(const StageLayout& sl, int64_t rank) {
  static std::map<std::pair<int64_t, int64_t>, double> cache;
  int64_t numel = 0;
  for (int64_t n : sl.param_numels) numel += n;
  const auto key = std::make_pair(rank, numel);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  nn::ParameterStore ps;
  for (size_t i = 0; i < sl.param_shapes.size(); ++i) {
    std::string name = "p";  // (not "p" + to_string: GCC 12 -O3 warns a false -Wrestrict on it)
    name += std::to_string(i);
    ps.Add(name, sl.param_shapes[i], nn::Init::Zeros(), false);
  }
  ps.AllocatePartial(false, false);  // shapes and offsets; PowerSgd reads its slots, not the store
  comm::ThreadsWorld world(1);
  parallel::PowerSgdOptions o;
  o.rank = static_cast<int>(rank);
  Result<std::unique_ptr<parallel::PowerSgd>> p = parallel::PowerSgd::Create(world.Rank(0), ps, 1, o);
  double ms = 0;
  if (p.ok()) {
    std::vector<float> g(static_cast<size_t>(numel), 1e-3f), out(g.size());
    float* slot = g.data();
    for (int pass = 0; pass < 2; ++pass) {
      const auto start = std::chrono::steady_clock::now();
      if (!(*p)->Reduce(&slot, out.data()).ok()) break;
      ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
  }
  cache[key] = ms;
  return ms;
}

LayoutInput::LowComm LowCommOf(const Candidate& c, const PlanSetup& s, double oversubscription) {
  using Kind = LayoutInput::LowComm::Kind;
  LayoutInput::LowComm low;
  const runtime::TrainSection& t = s.run.train;
  if (t.diloco()) {
    low.kind = Kind::kDiloco;
    low.inner_steps = t.diloco_inner_steps;
    low.outer_bytes = t.diloco_outer_dtype == "bf16" ? 2 : 4;
    low.fragments = t.diloco_fragments;
    low.overlap_steps = t.diloco_overlap_steps;
    return low;
  }
  low.kind = Kind::kPowerSgd;
  const StageLayout& sl = c.stages.front();
  const parallel::PowerSgdVolume v = parallel::PowerSgdVolumeOf(sl.param_shapes, t.powersgd_rank);
  low.plain = v.plain;
  low.p = v.p;
  low.q = v.q;
  low.compress_ms = MeasureCompressMs(sl, t.powersgd_rank) * std::max(1.0, oversubscription);
  return low;
}

}  // namespace

Result<LayoutInput> BuildLayoutInput(const Candidate& c, const PlanSetup& s, const ComputeProfile& profile,
                                     const CommTable& comm) {
  LayoutInput in;
  in.dp = c.dims.dp;
  in.tp = c.dims.tp;
  in.pp = c.dims.pp;
  in.zero = c.zero;
  in.micros = c.micros;
  in.schedule = c.schedule;
  in.bucket_bytes = s.run.train.bucket_bytes;
  // fp32 moments: AdamW 2, SGD with momentum 1, without 0; the fp32 parameters are the master.
  in.states.moment_bytes =
      4 * (s.optim.kind == optim::OptimizerKind::kAdamW ? 2 : (s.optim.sgd.momentum != 0.0 ? 1 : 0));
  in.optimizer_ns_per_element = profile.optimizer_ns_per_element;
  in.oversubscription = profile.oversubscription();
  in.hosts = PlaceOnHosts(c.dims, s.workers_per_host);
  in.step_stats_bytes = sizeof(runtime::RankStepRecord);  // Trainer: GatherStep, the gradient norm's parts included
  const bool bf16 = c.precision == "bf16";
  in.states.copy_bytes = bf16 ? 2 : 0;
  const ComputeOptions co{bf16, c.recompute == "block", 1.0};
  const ShapeKey key{c.micro_rows, s.gpt ? c.dims.tp : 1};
  if (!profile.Has(key, s.gpt.has_value()))
    return Status::Internal("plan: the profile lacks " + std::to_string(c.micro_rows) +
                            " rows at tp=" + std::to_string(key.second));
  const ShapeKey eval_key{EvalRows(c, s), key.second};
  if (!profile.Has(eval_key, s.gpt.has_value()))
    return Status::Internal("plan: the profile lacks " + std::to_string(eval_key.first) + " evaluation rows");
  for (const StageLayout& sl : c.stages) {
    StagePieces p;
    if (s.gpt) {
      const GptPieceCosts& g = profile.gpt.at(key);
      // Evaluation reuses its buffers from piece to piece when their sizes match exactly (the
      // buffer pool's free lists are keyed by size): the largest piece's peak. The head's logits
      // ([rows, T, vocab / tp]) match no block buffer when tp = 1, so beside the blocks' buffers,
      // which the pool still holds, they are new; the rest of the head's profiled peak is two
      // [rows, T, C] tensors that are not: the copy of its input (the profiled head is a stage
      // without the embedding, which copies what it receives; behind blocks, the block piece's
      // copy already counts it) and its final LayerNorm's output (a block buffer of that size
      // is free again by then). gpt-tiny's evaluation of 8 rows on 2 workers (recompute, 4
      // micro-batches, where evaluation is the peak) measured 11.02 MB: the block's 9.96 plus
      // the head's 2.10 less those two (1.05) is 11.01; block plus head was 5% over. A first
      // pipeline stage without the head measured the block's alone, and at tp = 2 the logits'
      // shards match the blocks' [rows, T, C] buffers (20.79 predicted, 20.81 measured,
      // recompute's dp=1,tp=2).
      const GptPieceCosts& e = profile.gpt.at(eval_key);
      const int64_t block_eval = sl.blocks > 0 ? e.block.eval_peak_bytes : 0;
      const int64_t head_eval = sl.has_head ? e.head.eval_peak_bytes : 0;
      p.eval_bytes = std::max({sl.has_embedding ? e.embedding.eval_peak_bytes : 0, block_eval, head_eval});
      if (key.second == 1 && block_eval > 0 && head_eval > 0) {
        p.eval_bytes = block_eval + std::max<int64_t>(0, head_eval - 2 * BlockActivationBytes(s, eval_key.first));
      }
      p.has_embedding = sl.has_embedding;
      p.has_head = sl.has_head;
      p.blocks = sl.blocks;
      p.embedding = g.embedding;
      p.block = g.block;
      p.head = g.head;
      // ZeRO is measured on the unsharded block only (tp = 1, over every worker); a
      // tensor-parallel block's units are its shards, and its ZeRO collectives do the same work
      // per element, so its stages take that figure. Without it they fell back to the curves,
      // which hide ZeRO-3 behind backward: gpt-tiny dp=4,tp=2 on 8 threads and 2 cores, 2
      // accumulation steps, ZeRO-3 predicted 1 ms faster than ZeRO-0, trained 12-18 ms slower
      // (the tp = 1 figure gives 15).
      if (key.second > 1)
        for (int k = 0; k < 2; ++k)
          if (const PieceCost* z = UnshardedZeroBlock(profile, k); z && p.block.zero_ns_per_element[k] <= 0) {
            p.block.zero_ns_per_element[k] = z->zero_ns_per_element[k];
            p.block.zero_overlap_ns_per_element[k] = z->zero_overlap_ns_per_element[k];
          }
      if (eval_key != key)
        p.eval_kernel_bytes = (sl.has_embedding ? e.embedding.kernel_bytes : 0) +
                              sl.blocks * (e.block.kernel_bytes + (bf16 ? e.block.bf16_kernel_bytes : 0)) +
                              (sl.has_head ? e.head.kernel_bytes : 0);
      const int64_t act = BlockActivationBytes(s, c.micro_rows);
      p.block_input_bytes = act;
      p.tensor_parallel = key.second > 1;
      p.send_bytes = sl.has_head ? 0 : act;
    } else {
      p.has_embedding = true;  // the whole model as one piece
      p.embedding = profile.whole.at(c.micro_rows);
      p.eval_bytes = profile.whole.at(eval_key.first).eval_peak_bytes;
      if (eval_key != key) {  // bf16 evaluation makes bf16 plans of its shape too
        const PieceCost& e = profile.whole.at(eval_key.first);
        p.eval_kernel_bytes = e.kernel_bytes + (bf16 ? e.bf16_kernel_bytes : 0);
      }
    }
    StageCost sc = ComposeStage(p, co);
    sc.param_numels = sl.param_numels;
    sc.units = sl.units;
    if (s.gpt && c.dims.tp > 1) {
      // Megatron's count: each block allreduces its [rows, T, C] activation twice forward (after
      // attention and after the MLP) and its input gradient twice backward; the embedding's
      // lookup and the head's input gradient once each. Measured inside fwd/bwd already; kept
      // to report the communication share.
      const int64_t bytes = (bf16 ? 2 : 4) * c.micro_rows * s.gpt->context * s.gpt->width;
      const int n = 4 * sl.blocks + (sl.has_embedding ? 1 : 0) + (sl.has_head ? 1 : 0);
      sc.tp_comm_ms = n * comm.Ms(CommOp::kAllreduce, c.dims.tp, bytes);
    }
    sc.tp_comm_in_compute = true;
    in.stages.push_back(std::move(sc));
  }
  if (s.run.train.powersgd() || s.run.train.diloco()) in.low_comm = LowCommOf(c, s, in.oversubscription);
  return in;
}

}  // namespace lockstep::planner
