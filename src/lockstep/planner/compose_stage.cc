// ComposeStage (step_model.h): a profiled stage's cost for one micro-batch from its pieces' (the
// embeddings, the blocks, the head, or a whole model), under train.precision and
// train.recompute.
#include <algorithm>

#include "lockstep/planner/step_model.h"

namespace lockstep::planner {

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

}  // namespace lockstep::planner
