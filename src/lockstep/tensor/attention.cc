// Causal multi-head self-attention on packed qkv, llm.c layout.
//
// Work is split over (batch, head) units; each unit runs whole on one thread, so results
// are bit-identical for any thread count (deterministic mode needs nothing extra).
//
// The per-head matrices are small (T x hs with hs = 32 for GPT-tiny), where a library
// GEMM call costs as much in set-up as in arithmetic, so the products run through one
// register-blocked AVX2 micro-kernel (attention_kernel.h) that also follows the causal
// mask: query block [i0, i0+4) only touches keys [0, i0+4), and the key-side gradients
// only queries >= the key, so the upper triangle is never computed (~half the work).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "lockstep/tensor/attention_kernel.h"
#include "lockstep/tensor/causal_softmax.h"
#include "lockstep/tensor/check.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/simd_avx512.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor {
namespace {

using internal::kRowBlock;
using internal::MicroGemm;

// The row softmax and its backward in the build for this processor (same bits either way);
// columns up to `end` (the block's causal extent) are written, see causal_softmax.h.
void SoftmaxRow(float* p, int64_t i, int64_t end) {
  if (internal::HasAvx512())
    internal::CausalSoftmaxRow512(p, i + 1, end);
  else
    internal::CausalSoftmaxRow(p, i + 1, end);
}

void SoftmaxBackwardRow(float* ds, const float* p, int64_t i, int64_t end, float scale) {
  if (internal::HasAvx512())
    internal::CausalSoftmaxBackwardRow512(ds, p, i + 1, end, scale);
  else
    internal::CausalSoftmaxBackwardRow(ds, p, i + 1, end, scale);
}

struct Dims {
  int64_t B, T, C, H, hs, C3, Tp;
  float scale;
  int64_t units() const { return B * H; }
  // Where (batch, head) unit u's slice starts: in qkv (its q; k and v follow C and 2C on), and
  // in out / dout.
  int64_t QkvOffset(int64_t u) const { return u / H * T * C3 + u % H * hs; }
  int64_t OutOffset(int64_t u) const { return u / H * T * C + u % H * hs; }
};

Dims MakeDims(int64_t B, int64_t T, int64_t C, int64_t H) {
  LS_CHECK(H > 0 && C % H == 0) << "Attention: C=" << C << " not divisible by H=" << H;
  Dims d{B, T, C, H, C / H, 3 * C, (T + 7) / 8 * 8, 0.0f};
  d.scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  return d;
}

// xt[k*Tp + t] = x[t*ld + k] for t, k < 16 from k0, t0: one 16 x 16 tile through registers.
__attribute__((target("avx512f"))) void TransposeTile16(float* xt, const float* x, int64_t ld, int64_t Tp, int64_t t0,
                                                        int64_t k0) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(x + (t0 + i) * ld + k0);
  internal::Transpose16x16(r);
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(xt + (k0 + i) * Tp + t0, r[i]);
}

// xt[k*Tp + t] = x[t*ld + k] for t < T (rows of hs values), zero for T <= t < Tp. Whole 16 x 16
// tiles go through registers on AVX-512 (element by element, this copy was a quarter of the
// forward unit's own time); the edges element by element.
void PackTransposed(float* xt, const float* x, int64_t ld, const Dims& d) {
  int64_t t_done = 0, k_done = 0;
  if (internal::HasAvx512()) {
    t_done = d.T / 16 * 16;
    k_done = d.hs / 16 * 16;
    for (int64_t t0 = 0; t0 < t_done; t0 += 16)
      for (int64_t k0 = 0; k0 < k_done; k0 += 16) TransposeTile16(xt, x, ld, d.Tp, t0, k0);
  }
  for (int64_t k = 0; k < d.hs; ++k) {
    float* row = xt + k * d.Tp;
    for (int64_t t = k < k_done ? t_done : 0; t < d.T; ++t) row[t] = x[t * ld + k];
    std::fill(row + d.T, row + d.Tp, 0.0f);
  }
}

// Contiguous copy of T rows of hs values (row stride ld). The products read B rows one
// after another; straight from qkv their 3C-float stride maps them onto a few L1 sets and
// they evict each other, so every operand read as B is packed first. An inline loop: a
// library copy per row (hs = 32 floats) cost a call each, 7% of the attention benchmark.
void PackRows(float* xp, const float* x, int64_t ld, const Dims& d) {
  const int64_t whole = d.hs / 8 * 8;  // (GCC turns a plain copy loop back into memcpy calls)
  for (int64_t t = 0; t < d.T; ++t) {
    const float* src = x + t * ld;
    float* dst = xp + t * d.hs;
    for (int64_t k = 0; k < whole; k += 8) _mm256_storeu_ps(dst + k, _mm256_loadu_ps(src + k));
    if (whole < d.hs) {
      const __m256i m = internal::TailMask(d.hs - whole);
      _mm256_maskstore_ps(dst + whole, m, _mm256_maskload_ps(src + whole, m));
    }
  }
}

// Asks for rows [r0, r1) of a slice of hs floats a row (row stride ld) to be brought into L2.
// A unit reads its q, k, v (and in backward dO and P) as strided rows of hs floats that the
// hardware prefetcher does not follow; loaded on first use they stalled the packs (a sixth
// of the forward unit's time). So each unit fetches the next unit's rows, a row block's worth
// per step of its own loop, and finds its own already there. (The next unit is this thread's
// next under the static schedule, except at the end of a thread's share: then the fetch is
// wasted, not wrong.)
void PrefetchRows(const float* x, int64_t ld, int64_t r0, int64_t r1, int64_t len) {
  for (int64_t t = r0; t < r1; ++t) {
    const char* row = reinterpret_cast<const char*>(x + t * ld);
    for (int64_t off = 0; off < len * 4; off += 64) _mm_prefetch(row + off, _MM_HINT_T1);
    _mm_prefetch(row + len * 4 - 1, _MM_HINT_T1);
  }
}

float* UnitScratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

void ForwardUnit(const Dims& d, int64_t unit, float* out, float* att, const float* qkv) {
  const int64_t T = d.T;
  const float* q = qkv + d.QkvOffset(unit);
  const float* k = q + d.C;
  const float* v = q + 2 * d.C;
  float* p = att + unit * T * T;
  float* o = out + d.OutOffset(unit);
  float* kt = UnitScratch(d.hs * d.Tp + T * d.hs);
  float* vp = kt + d.hs * d.Tp;
  const bool has_next = unit + 1 < d.units();
  PackTransposed(kt, k, d.C3, d);
  PackRows(vp, v, d.C3, d);
  for (int64_t i0 = 0; i0 < T; i0 += kRowBlock) {
    const int rows = static_cast<int>(std::min<int64_t>(kRowBlock, T - i0));
    const int64_t keys = i0 + rows;  // causal extent of this block
    if (has_next) {
      for (int part = 0; part < 3; ++part) PrefetchRows(qkv + d.QkvOffset(unit + 1) + part * d.C, d.C3, i0, keys, d.hs);
      PrefetchRows(out + d.OutOffset(unit + 1), d.C, i0, keys, d.hs);  // written
    }
    // S[i, j] = scale * q_i . k_j for j < keys
    MicroGemm(rows, d.hs, q + i0 * d.C3, d.C3, 1, kt, d.Tp, keys, p + i0 * T, T, d.scale, false);
    for (int64_t i = i0; i < i0 + rows; ++i) SoftmaxRow(p + i * T, i, keys);
    // O[i, :] = sum_j P[i, j] v_j
    MicroGemm(rows, keys, p + i0 * T, T, 1, vp, d.hs, d.hs, o + i0 * d.C, d.C, 1.0f, false);
  }
}

void BackwardUnit(const Dims& d, int64_t unit, float* dqkv, const float* dout, const float* qkv, const float* att,
                  bool accumulate) {
  const int64_t T = d.T;
  const int64_t base = d.QkvOffset(unit);
  const float* q = qkv + base;
  const float* k = q + d.C;
  const float* v = q + 2 * d.C;
  float* dq = dqkv + base;
  float* dk = dq + d.C;
  float* dv = dq + 2 * d.C;
  const float* p = att + unit * T * T;
  const float* dO = dout + d.OutOffset(unit);
  // dS lives in a per-thread T x T buffer (L2-resident at T = 128) rather than in a
  // B*H*T*T array: it is consumed within the unit, and the round trip through memory was
  // a large part of this memory-bound kernel.
  float* vt = UnitScratch(d.hs * d.Tp + 3 * T * d.hs + T * T);
  float* ds = vt + d.hs * d.Tp + 3 * T * d.hs;
  float* kp = vt + d.hs * d.Tp;
  float* qp = kp + T * d.hs;
  float* dop = qp + T * d.hs;
  const bool has_next = unit + 1 < d.units();
  const int64_t next = has_next ? d.QkvOffset(unit + 1) : 0;
  PackTransposed(vt, v, d.C3, d);
  PackRows(kp, k, d.C3, d);
  PackRows(qp, q, d.C3, d);
  PackRows(dop, dO, d.C, d);
  for (int64_t i0 = 0; i0 < T; i0 += kRowBlock) {
    const int rows = static_cast<int>(std::min<int64_t>(kRowBlock, T - i0));
    const int64_t keys = i0 + rows;
    if (has_next) {
      for (int part = 0; part < 3; ++part) {
        PrefetchRows(qkv + next + part * d.C, d.C3, i0, keys, d.hs);
        PrefetchRows(dqkv + next + part * d.C, d.C3, i0, keys, d.hs);  // dq, dk, dv: written
      }
      PrefetchRows(dout + d.OutOffset(unit + 1), d.C, i0, keys, d.hs);
      for (int64_t i = i0; i < keys; ++i) PrefetchRows(p + T * T + i * T, T, 0, 1, i + 1);  // P's causal rows
    }
    // dP[i, j] = dO_i . v_j, then dS in place.
    MicroGemm(rows, d.hs, dO + i0 * d.C, d.C, 1, vt, d.Tp, keys, ds + i0 * T, T, 1.0f, false);
    for (int64_t i = i0; i < i0 + rows; ++i) SoftmaxBackwardRow(ds + i * T, p + i * T, i, keys, d.scale);
    // dq_i += sum_j dS[i, j] k_j
    MicroGemm(rows, keys, ds + i0 * T, T, 1, kp, d.hs, d.hs, dq + i0 * d.C3, d.C3, 1.0f, accumulate);
  }
  for (int64_t j0 = 0; j0 < T; j0 += kRowBlock) {
    const int rows = static_cast<int>(std::min<int64_t>(kRowBlock, T - j0));
    // dk_j += sum_{i >= j} dS[i, j] q_i;  dv_j += sum_{i >= j} P[i, j] dO_i
    // (A is read transposed: element (r, kk) at [(j0 + kk) * T + j0 + r].)
    MicroGemm(rows, T - j0, ds + j0 * T + j0, 1, T, qp + j0 * d.hs, d.hs, d.hs, dk + j0 * d.C3, d.C3, 1.0f,
              accumulate);
    MicroGemm(rows, T - j0, p + j0 * T + j0, 1, T, dop + j0 * d.hs, d.hs, d.hs, dv + j0 * d.C3, d.C3, 1.0f,
              accumulate);
  }
}

template <typename Fn>
void ForEachUnit(int64_t units, Fn fn) {
  if (omp_in_parallel() || omp_get_max_threads() == 1 || units == 1) {
    for (int64_t u = 0; u < units; ++u) fn(u);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t u = 0; u < units; ++u) fn(u);
}

}  // namespace

void AttentionForward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t H) {
  const Dims d = MakeDims(B, T, C, H);
  ForEachUnit(B * H, [&](int64_t u) { ForwardUnit(d, u, out, att, qkv); });
}

void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int64_t B, int64_t T,
                       int64_t C, int64_t H, bool accumulate) {
  const Dims d = MakeDims(B, T, C, H);
  ForEachUnit(B * H, [&](int64_t u) { BackwardUnit(d, u, dqkv, dout, qkv, att, accumulate); });
}

}  // namespace lockstep::tensor
