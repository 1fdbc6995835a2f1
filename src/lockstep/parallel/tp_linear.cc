#include "lockstep/parallel/tp_linear.h"

#include <cstring>

#include "lockstep/nn/linear.h"
#include "lockstep/nn/shape_ops.h"
#include "lockstep/tensor/kernels.h"

namespace lockstep::parallel {
namespace {

// Rows of slice j of a column-parallel weight: piece j of each of `parts` blocks.
struct RowSlice {
  int64_t block, piece;  // rows per block, rows per piece
  int parts;
  int64_t rows() const { return piece * parts; }
  int64_t first(int j, int p) const { return p * block + j * piece; }
};

// Copies slice j's rows of w (width `in`) into dst, contiguous.
void GatherRows(float* dst, const float* w, const RowSlice& s, int j, int64_t in) {
  for (int p = 0; p < s.parts; ++p)
    std::memcpy(dst + p * s.piece * in, w + s.first(j, p) * in, static_cast<size_t>(s.piece * in) * sizeof(float));
}
// dst rows of slice j += src (contiguous, as GatherRows laid it out).
void ScatterAddRows(float* dst, const float* src, const RowSlice& s, int j, int64_t in) {
  for (int p = 0; p < s.parts; ++p) tensor::AddInPlace(dst + s.first(j, p) * in, src + p * s.piece * in, s.piece * in);
}
// Columns [c0, c0 + cw) of w [rows, ld] into dst [rows, cw]; and the reverse add.
void GatherCols(float* dst, const float* w, int64_t rows, int64_t ld, int64_t c0, int64_t cw) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * cw, w + r * ld + c0, static_cast<size_t>(cw) * sizeof(float));
}
void ScatterAddCols(float* dst, const float* src, int64_t rows, int64_t ld, int64_t c0, int64_t cw) {
  for (int64_t r = 0; r < rows; ++r) tensor::AddInPlace(dst + r * ld + c0, src + r * cw, cw);
}

tensor::Shape WithLast(tensor::Shape s, int64_t last) {
  s.back() = last;
  return s;
}

}  // namespace

std::vector<Variable> ColumnParallelLinear(Tape& tape, TpContext& tp, const Variable& x, const Variable& w,
                                           const Variable& b, int parts, bool gelu) {
  if (tp.plain()) return {gelu ? nn::LinearGeluForward(tape, x, w, b) : nn::LinearForward(tape, x, w, b)};
  const int L = tp.local_slices();
  const int64_t out_local = w.shape()[0], in = w.shape()[1], n = x.numel() / in;
  LS_CHECK(x.shape().back() == in && out_local % (parts * L) == 0) << "ColumnParallelLinear shapes";
  const RowSlice rs{out_local / parts, out_local / parts / L, parts};
  const bool gather = tp.deterministic();
  const bool rec = tape.ShouldRecord({&x, &w, &b});
  std::vector<Variable> ys;
  std::vector<tensor::Tensor> zs;  // with gelu: each slice's pre-activation, then gelu', then its gradient
  tensor::Tensor wj = gather ? tape.NewBuffer({rs.rows(), in}) : tensor::Tensor();
  tensor::Tensor bj = gather && b.defined() ? tape.NewBuffer({rs.rows()}) : tensor::Tensor();
  for (int j = 0; j < L; ++j) {
    const float* W = w.data();
    const float* B = b.defined() ? b.data() : nullptr;
    if (gather) {
      GatherRows(wj.data<float>(), w.data(), rs, j, in);
      W = wj.data<float>();
      if (B != nullptr) {
        GatherRows(bj.data<float>(), b.data(), rs, j, 1);
        B = bj.data<float>();
      }
    }
    Variable y = tape.NewActivation(WithLast(x.shape(), rs.rows()), rec);
    if (gelu) {
      zs.push_back(tape.NewBuffer(y.shape()));
      tensor::LinearGeluForward(y.data(), zs.back().data<float>(), x.data(), W, B, n, in, rs.rows(), rec);
    } else {
      tensor::LinearForward(y.data(), x.data(), W, B, n, in, rs.rows());
    }
    ys.push_back(y);
  }
  if (!rec) return ys;
  autograd::BufferPool* pool = &tape.pool();
  TpContext* ctx = &tp;
  tape.Record({x, w, b}, [ys, zs, x, w, b, rs, L, in, n, gather, pool, ctx]() mutable {
    const int64_t rows = rs.rows();
    tensor::Tensor partials = x.requires_grad() ? pool->Empty({L, n, in}) : tensor::Tensor();
    tensor::Tensor wj = gather ? pool->Empty({rows, in}) : tensor::Tensor();
    tensor::Tensor dwj = gather ? pool->Empty({rows, in}) : tensor::Tensor();
    tensor::Tensor dbj = gather ? pool->Empty({rows}) : tensor::Tensor();
    for (int j = 0; j < L; ++j) {
      float* partial = x.requires_grad() ? partials.data<float>() + j * n * in : nullptr;
      if (!ys[j].has_grad()) {  // an output nobody used: no gradient flows through slice j
        if (partial) std::memset(partial, 0, static_cast<size_t>(n * in) * sizeof(float));
        continue;
      }
      const float* dy = ys[j].grad().data<float>();
      const bool want_b = b.defined() && b.requires_grad();
      // Where the bias's gradient goes: the slice's own zeroed buffer (scattered below), or the
      // bias's gradient itself.
      float* const db = !want_b ? nullptr : gather ? dbj.data<float>() : b.GradAccumulate();
      if (want_b && gather) std::memset(db, 0, static_cast<size_t>(rows) * sizeof(float));
      float* db_left = db;  // what the products' call still has to sum into
      if (!zs.empty()) {
        // d(pre-activation) = gelu' * dy in the slice's own buffer, and the bias's gradient in
        // the same pass (MulGradColumnSum: the bits of MulGrad, then LinearBackward's column
        // sum, as the one-worker path runs it)
        float* dz = zs[j].data<float>();
        tensor::MulGradColumnSum(dz, dz, dy, db, n, rows);
        db_left = nullptr;
        dy = dz;
      }
      const float* W = w.data();
      if (gather) {
        GatherRows(wj.data<float>(), w.data(), rs, j, in);
        W = wj.data<float>();
      }
      if (!gather) {  // both products in one call (bf16 rounds dy once)
        tensor::LinearBackward(partial, w.requires_grad() ? w.GradAccumulate() : nullptr, db_left, dy, x.data(), W, n,
                               in, rows, 0.0f);
        continue;
      }
      if (partial) tensor::Gemm(false, false, n, in, rows, 1.0f, dy, rows, W, in, 0.0f, partial, in);
      if (!w.requires_grad() && !want_b) continue;
      std::memset(dwj.data<float>(), 0, static_cast<size_t>(rows * in) * sizeof(float));
      tensor::LinearBackward(nullptr, dwj.data<float>(), db_left, dy, x.data(), W, n, in, rows);
      if (w.requires_grad()) ScatterAddRows(w.GradAccumulate(), dwj.data<float>(), rs, j, in);
      if (want_b) ScatterAddRows(b.GradAccumulate(), dbj.data<float>(), rs, j, 1);
    }
    if (!x.requires_grad()) return;
    tensor::Tensor sum = pool->Empty({n, in});
    ctx->SumSlices(partials.data<float>(), sum.data<float>(), static_cast<size_t>(n * in));
    bool fresh = false;
    float* dx = x.GradForWrite(&fresh);
    if (fresh)
      std::memcpy(dx, sum.data<float>(), static_cast<size_t>(n * in) * sizeof(float));
    else
      tensor::AddInPlace(dx, sum.data<float>(), n * in);
  });
  return ys;
}

Variable RowParallelLinear(Tape& tape, TpContext& tp, const std::vector<Variable>& xs, const Variable& w,
                           const Variable& b) {
  if (tp.plain()) return nn::LinearForward(tape, xs.at(0), w, b);
  const int L = tp.local_slices();
  LS_CHECK(static_cast<int>(xs.size()) == L) << "RowParallelLinear: " << xs.size() << " inputs for " << L << " slices";
  const int64_t out = w.shape()[0], in_local = w.shape()[1], cw = in_local / L;
  const int64_t n = xs[0].numel() / cw;
  LS_CHECK(in_local % L == 0 && xs[0].shape().back() == cw) << "RowParallelLinear shapes";
  const bool gather = tp.deterministic();
  bool rec = tape.ShouldRecord({&w, &b});
  for (const Variable& x : xs) rec = rec || tape.ShouldRecord({&x});
  tensor::Tensor partials = tape.NewBuffer({L, n, out});
  tensor::Tensor wj = gather ? tape.NewBuffer({out, cw}) : tensor::Tensor();
  for (int j = 0; j < L; ++j) {
    const float* W = w.data();
    if (gather) {
      GatherCols(wj.data<float>(), w.data(), out, in_local, j * cw, cw);
      W = wj.data<float>();
    }
    tensor::Gemm(false, true, n, out, cw, 1.0f, xs[j].data(), cw, W, cw, 0.0f, partials.data<float>() + j * n * out,
                 out);
  }
  Variable y = tape.NewActivation(WithLast(xs[0].shape(), out), rec);
  tp.SumSlices(partials.data<float>(), y.data(), static_cast<size_t>(n * out));
  if (b.defined()) {
    for (int64_t i = 0; i < n; ++i) tensor::AddInPlace(y.data() + i * out, b.data(), out);
  }
  if (!rec) return y;
  std::vector<Variable> targets = xs;
  targets.push_back(w);
  targets.push_back(b);
  autograd::BufferPool* pool = &tape.pool();
  tape.Record(targets, [y, xs, w, b, L, out, in_local, cw, n, gather, pool] {
    if (!y.has_grad()) return;
    const float* dy = y.grad().data<float>();
    if (b.defined() && b.requires_grad())
      tensor::LinearBackward(nullptr, nullptr, b.GradAccumulate(), dy, nullptr, nullptr, n, 0, out);
    tensor::Tensor wj = gather ? pool->Empty({out, cw}) : tensor::Tensor();
    tensor::Tensor dwj = gather ? pool->Empty({out, cw}) : tensor::Tensor();
    for (int j = 0; j < L; ++j) {
      const float* W = w.data();
      if (gather) {
        GatherCols(wj.data<float>(), w.data(), out, in_local, j * cw, cw);
        W = wj.data<float>();
      }
      if (w.requires_grad() && gather) {
        std::memset(dwj.data<float>(), 0, static_cast<size_t>(out * cw) * sizeof(float));
        tensor::LinearBackward(nullptr, dwj.data<float>(), nullptr, dy, xs[j].data(), W, n, cw, out);
        ScatterAddCols(w.GradAccumulate(), dwj.data<float>(), out, in_local, j * cw, cw);
      }
      // The input gradient (overwriting a fresh one) and, unsharded, the weight gradient in one
      // call: bf16 rounds dy once for both.
      bool fresh = false;
      float* dx = xs[j].requires_grad() ? xs[j].GradForWrite(&fresh) : nullptr;
      float* dw = w.requires_grad() && !gather ? w.GradAccumulate() : nullptr;
      tensor::LinearBackward(dx, dw, nullptr, dy, xs[j].data(), W, n, cw, out, fresh ? 0.0f : 1.0f);
    }
  });
  return y;
}

Variable RowParallelLinearResidual(Tape& tape, TpContext& tp, const std::vector<Variable>& xs, const Variable& w,
                                   const Variable& b, const Variable& res) {
  if (tp.plain()) return nn::LinearResidualForward(tape, res, xs.at(0), w, b);
  return nn::AddForward(tape, res, RowParallelLinear(tape, tp, xs, w, b));
}

}  // namespace lockstep::parallel
