#include "lockstep/parallel/tp_vocab.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "lockstep/nn/cross_entropy.h"
#include "lockstep/nn/embedding.h"
#include "lockstep/tensor/kernels.h"

namespace lockstep::parallel {
namespace {

// Per row of the rank's slices: the global row max, the softmax denominator (sum over all
// slices of exp(x - max), tree-summed over slices) and the target logit.
struct RowStats {
  std::vector<float> max, sum, target;
};

// Entries of slice j that are real vocabulary (not padding): [0, Valid(...)).
int64_t ValidIn(int64_t slice_begin, int64_t vs, int64_t vocab) {
  return std::clamp<int64_t>(vocab - slice_begin, 0, vs);
}

RowStats ComputeRowStats(TpContext& tp, const std::vector<const float*>& logits, int64_t n, int64_t vs,
                         const int32_t* targets, int64_t vocab_begin, int64_t vocab) {
  const int L = static_cast<int>(logits.size());
  RowStats s;
  s.max.assign(n, -std::numeric_limits<float>::infinity());
  for (int j = 0; j < L; ++j) {
    const int64_t valid = ValidIn(vocab_begin + j * vs, vs, vocab);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t v = 0; v < valid; ++v) s.max[i] = std::max(s.max[i], logits[j][i * vs + v]);
  }
  tp.MaxInPlace(s.max.data(), n);
  std::vector<float> partials(static_cast<size_t>(L * n));
  for (int j = 0; j < L; ++j) {
    const int64_t valid = ValidIn(vocab_begin + j * vs, vs, vocab);
    for (int64_t i = 0; i < n; ++i) {
      const float* x = logits[j] + i * vs;
      double acc = 0;  // fixed order, one slice at a time: the same on every rank holding it
      for (int64_t v = 0; v < valid; ++v) acc += std::exp(x[v] - s.max[i]);
      partials[j * n + i] = static_cast<float>(acc);
    }
  }
  s.sum.resize(n);
  tp.SumSlices(partials.data(), s.sum.data(), n);
  s.target.assign(n, 0.0f);
  const int64_t lo = vocab_begin, hi = vocab_begin + L * vs;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = targets[i];
    if (t >= lo && t < hi) s.target[i] = logits[(t - lo) / vs][i * vs + (t - lo) % vs];
  }
  tp.CopyFromOwner(s.target.data(), n);
  return s;
}

float RowLoss(const RowStats& s, int64_t i) { return std::log(s.sum[i]) + (s.max[i] - s.target[i]); }

}  // namespace

Variable VocabParallelEmbedding(Tape& tape, TpContext& tp, const tensor::Tensor& ids, const Variable& table,
                                int64_t vocab_begin, int64_t vocab) {
  if (tp.plain()) return nn::EmbeddingForward(tape, ids, table);
  const int64_t rows = table.shape()[0], c = table.shape()[1], n = ids.numel();
  const int32_t* id = ids.data<int32_t>();
  tensor::Shape shape = ids.shape();
  shape.push_back(c);
  const bool rec = tape.ShouldRecord({&table});
  Variable out = tape.NewActivation(shape, rec);
  float* y = out.data();
  for (int64_t i = 0; i < n; ++i) {
    LS_CHECK(id[i] >= 0 && id[i] < vocab) << "Embedding id " << id[i] << " outside [0, " << vocab << ")";
    const int64_t r = id[i] - vocab_begin;
    if (r >= 0 && r < rows)
      std::memcpy(y + i * c, table.data() + r * c, static_cast<size_t>(c) * sizeof(float));
    else
      std::memset(y + i * c, 0, static_cast<size_t>(c) * sizeof(float));
  }
  tp.CopyFromOwner(y, static_cast<size_t>(n * c));
  if (rec) {
    tape.Record({table}, [out, ids, table, vocab_begin, rows, c, n] {
      if (!out.has_grad() || !table.requires_grad()) return;
      // Rows in order of i for every table row: the accumulation order of the full table's
      // kernel, so the owned rows get the same bits as with tp = 1.
      float* dtable = table.GradAccumulate();
      const float* dy = out.grad().data<float>();
      const int32_t* id = ids.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = id[i] - vocab_begin;
        if (r >= 0 && r < rows) tensor::AddInPlace(dtable + r * c, dy + i * c, c);
      }
    });
  }
  return out;
}

Variable VocabParallelCrossEntropy(Tape& tape, TpContext& tp, const std::vector<Variable>& logits,
                                   const tensor::Tensor& targets, int64_t vocab_begin, int64_t vocab) {
  if (tp.plain()) {
    const Variable& x = logits.at(0);
    LS_CHECK(x.value().ndim() == 2) << "cross-entropy logits " << x.value().ToString();
    return nn::SoftmaxCrossEntropyForward(tape, x, targets, vocab);
  }
  const int64_t vs = logits.at(0).shape().back(), n = logits[0].numel() / vs;
  const int32_t* t = targets.data<int32_t>();
  LS_CHECK(targets.numel() == n) << "cross-entropy targets " << targets.ToString();
  std::vector<const float*> raw;
  bool rec = false;
  for (const Variable& x : logits) {
    raw.push_back(x.data());
    rec = rec || tape.ShouldRecord({&x});
  }
  RowStats s = ComputeRowStats(tp, raw, n, vs, t, vocab_begin, vocab);
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] < 0) continue;
    total += RowLoss(s, i);
    ++count;
  }
  Variable loss = tape.NewActivation({1}, rec);
  loss.data()[0] = static_cast<float>(count > 0 ? total / static_cast<double>(count) : 0.0);
  if (!rec) return loss;
  // d(mean loss)/d(logit) = (softmax - onehot) / count, saved per slice for backward.
  const float dscale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  std::vector<tensor::Tensor> saved;
  for (size_t j = 0; j < logits.size(); ++j) {
    tensor::Tensor d = tape.NewBuffer({n, vs});
    float* g = d.data<float>();
    const int64_t base = vocab_begin + static_cast<int64_t>(j) * vs;
    const int64_t valid = ValidIn(base, vs, vocab);
    for (int64_t i = 0; i < n; ++i) {
      float* row = g + i * vs;
      if (t[i] < 0) {
        std::memset(row, 0, static_cast<size_t>(vs) * sizeof(float));
        continue;
      }
      const float k = dscale / s.sum[i];
      for (int64_t v = 0; v < valid; ++v) row[v] = std::exp(raw[j][i * vs + v] - s.max[i]) * k;
      for (int64_t v = valid; v < vs; ++v) row[v] = 0.0f;  // padding: never predicted
      if (t[i] >= base && t[i] < base + vs) row[t[i] - base] -= dscale;
    }
    saved.push_back(d);
  }
  tape.Record(logits, [loss, logits, saved] {
    if (!loss.has_grad()) return;
    const float dloss = loss.grad().data<float>()[0];
    for (size_t j = 0; j < logits.size(); ++j) {
      if (!logits[j].requires_grad()) continue;
      const int64_t m = logits[j].numel();
      if (logits[j].AdoptGrad(saved[j])) {
        if (dloss != 1.0f) tensor::Scale(logits[j].grad_data(), dloss, m);
      } else {
        tensor::Axpy(logits[j].GradAccumulate(), dloss, saved[j].data<float>(), m);
      }
    }
  });
  return loss;
}

nn::EvalResult VocabParallelCrossEntropyStats(TpContext& tp, const std::vector<const float*>& logits, int64_t n,
                                              int64_t vs, const int32_t* targets, int64_t vocab_begin, int64_t vocab) {
  nn::EvalResult r;
  if (tp.plain()) {
    nn::CrossEntropyStats s = nn::SoftmaxCrossEntropyStats(logits.at(0), targets, n, vs, vocab);
    return {s.loss_sum, s.count, s.correct};
  }
  RowStats s = ComputeRowStats(tp, logits, n, vs, targets, vocab_begin, vocab);
  // Argmax: the first global maximum. Each rank proposes its first index reaching the row max.
  std::vector<int32_t> best(static_cast<size_t>(n), std::numeric_limits<int32_t>::max());
  for (int64_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < logits.size() && best[i] == std::numeric_limits<int32_t>::max(); ++j) {
      const int64_t valid = ValidIn(vocab_begin + static_cast<int64_t>(j) * vs, vs, vocab);
      for (int64_t v = 0; v < valid; ++v) {
        if (logits[j][i * vs + v] == s.max[i]) {
          best[i] = static_cast<int32_t>(vocab_begin + static_cast<int64_t>(j) * vs + v);
          break;
        }
      }
    }
  }
  tp.MinInPlace(best.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0) continue;
    r.loss_sum += RowLoss(s, i);
    ++r.count;
    r.correct += best[i] == targets[i];
  }
  return r;
}

}  // namespace lockstep::parallel
