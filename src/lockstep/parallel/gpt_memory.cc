#include "lockstep/parallel/gpt_memory.h"

namespace lockstep::parallel {

ActivationBytes EstimateGptActivations(const GptShardOptions& o, int tp, int64_t rows, int64_t seq,
                                       bool deterministic) {
  const int64_t e = 4;  // fp32
  const int64_t s = seq, b = rows, h = o.model.width, a = o.model.heads, t = tp, v = o.model.vocab;
  const int64_t sbh = s * b * h * e, sb = s * b * e;
  const int end = o.end_layer < 0 ? static_cast<int>(o.model.layers) : o.end_layer;
  const int64_t layers = end - o.first_layer;
  ActivationBytes block;
  block.residual = 2 * sbh;
  block.layernorm = 2 * sbh + 4 * sb;
  const int64_t proj = t > 1 || deterministic ? sbh : 0;  // a projection's output kept apart
  block.attention = (4 * sbh) / t + proj + (a / t) * s * s * b * e;
  block.mlp = (8 * sbh) / t + proj;
  const int64_t one_block = block.residual + block.layernorm + block.attention + block.mlp;
  ActivationBytes r;
  if (o.recompute) {
    r.residual = layers * sbh;  // each block's input
    r.recompute = layers > 0 ? one_block : 0;
  } else {
    r.residual = layers * block.residual;
    r.layernorm = layers * block.layernorm;
    r.attention = layers * block.attention;
    r.mlp = layers * block.mlp;
  }
  if (o.has_embedding) r.embedding = 2 * sbh + 2 * sb;              // token, position rows; the two id buffers
  if (o.has_head) r.head = sbh + 2 * sb + 2 * s * b * (v / t) * e;  // lnf output + stats; logits, dlogits
  return r;
}

}  // namespace lockstep::parallel
