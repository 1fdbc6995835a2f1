// Vocabulary-parallel token embedding and cross-entropy (Megatron): the vocabulary rows of
// the embedding table and of the LM head are split over the tensor-parallel ranks, so the
// full [tokens, vocab] logits never exist on one rank.
//
// Embedding: a rank looks up the tokens its rows cover and leaves the others zero; the
// ranks' results are combined exactly (TpContext::CopyFromOwner). Cross-entropy: the row max
// is an allreduce(max), the softmax denominator a sum of per-slice partial sums (over the
// canonical slices, so deterministic mode gives the same bits at every tp degree), the
// target logit comes from the rank that holds it. Each rank then writes the gradient of its
// own logits only. With tp = 1 and no determinism both are the plain nn ops.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/autograd/tape.h"
#include "lockstep/nn/model.h"
#include "lockstep/parallel/tp_context.h"

namespace lockstep::parallel {

using autograd::Tape;
using autograd::Variable;

// ids: I32 tokens (any shape), each in [0, vocab). table: this rank's rows
// [vocab_begin, vocab_begin + rows) of the [vocab, C] embedding. Returns ids.shape + [C].
Variable VocabParallelEmbedding(Tape& tape, TpContext& tp, const tensor::Tensor& ids, const Variable& table,
                                int64_t vocab_begin, int64_t vocab);

// logits: local_slices() tensors [n, Vs] (any shape ending in Vs); slice j holds vocabulary
// entries [vocab_begin + j*Vs, vocab_begin + (j+1)*Vs). targets: I32 [n] in [-1, vocab).
// Entries >= vocab are padding (model.vocab_pad): outside the softmax, gradient 0.
// Returns the mean loss over rows with a target >= 0, as a [1] Variable.
Variable VocabParallelCrossEntropy(Tape& tape, TpContext& tp, const std::vector<Variable>& logits,
                                   const tensor::Tensor& targets, int64_t vocab_begin, int64_t vocab);

// Evaluation (no tape): loss sum, counted rows, rows whose argmax (first maximum over the
// whole vocabulary) is the target. Same arguments as above, as raw slices.
nn::EvalResult VocabParallelCrossEntropyStats(TpContext& tp, const std::vector<const float*>& logits, int64_t n,
                                              int64_t slice_vocab, const int32_t* targets, int64_t vocab_begin,
                                              int64_t vocab);

}  // namespace lockstep::parallel
