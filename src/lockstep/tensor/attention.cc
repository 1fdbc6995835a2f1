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
#include <limits>
#include <vector>

#include "lockstep/tensor/attention_kernel.h"
#include "lockstep/tensor/check.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/simd_avx512.h"
#include "lockstep/tensor/simd_math.h"

namespace lockstep::tensor {
namespace {

using internal::kRowBlock;
using internal::MicroGemm;

// Softmax of row i over columns [0, i]; columns (i, T) set to zero.
void CausalSoftmaxRow(float* p, int64_t i, int64_t T) {
  const int64_t n = i + 1;
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(p + j));
  float mx = internal::HorizontalMax(vmax);
  for (; j < n; ++j) mx = std::max(mx, p[j]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vs = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 e = internal::Exp256(_mm256_sub_ps(_mm256_loadu_ps(p + j), vm));
    _mm256_storeu_ps(p + j, e);
    vs = _mm256_add_ps(vs, e);
  }
  if (j < n) {
    __m256i mask = internal::TailMask(n - j);
    __m256 e = internal::Exp256(_mm256_sub_ps(_mm256_maskload_ps(p + j, mask), vm));
    e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(p + j, mask, e);
    vs = _mm256_add_ps(vs, e);
  }
  const float inv = 1.0f / internal::HorizontalSum(vs);
  const __m256 vinv = _mm256_set1_ps(inv);
  j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(p + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), vinv));
  for (; j < n; ++j) p[j] *= inv;
  std::fill(p + n, p + T, 0.0f);
}

// ds[j] = p[j] * (dp[j] - sum_k p[k] dp[k]) * scale for j <= i (ds holds dp on entry);
// zero for i < j < T.
void CausalSoftmaxBackwardRow(float* ds, const float* p, int64_t i, int64_t T, float scale) {
  const int64_t n = i + 1;
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(p + j), _mm256_loadu_ps(ds + j), acc);
  float dot = internal::HorizontalSum(acc);
  for (; j < n; ++j) dot += p[j] * ds[j];
  const __m256 vdot = _mm256_set1_ps(dot), vscale = _mm256_set1_ps(scale);
  j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 d = _mm256_sub_ps(_mm256_loadu_ps(ds + j), vdot);
    _mm256_storeu_ps(ds + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + j), d), vscale));
  }
  for (; j < n; ++j) ds[j] = p[j] * (ds[j] - dot) * scale;
  std::fill(ds + n, ds + T, 0.0f);
}

struct Dims {
  int64_t B, T, C, H, hs, C3, Tp;
  float scale;
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

float* UnitScratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

void ForwardUnit(const Dims& d, int64_t unit, float* out, float* att, const float* qkv) {
  const int64_t b = unit / d.H, h = unit % d.H, T = d.T;
  const float* q = qkv + b * T * d.C3 + h * d.hs;
  const float* k = q + d.C;
  const float* v = q + 2 * d.C;
  float* p = att + unit * T * T;
  float* o = out + b * T * d.C + h * d.hs;
  float* kt = UnitScratch(d.hs * d.Tp + T * d.hs);
  float* vp = kt + d.hs * d.Tp;
  PackTransposed(kt, k, d.C3, d);
  PackRows(vp, v, d.C3, d);
  for (int64_t i0 = 0; i0 < T; i0 += kRowBlock) {
    const int rows = static_cast<int>(std::min<int64_t>(kRowBlock, T - i0));
    const int64_t keys = i0 + rows;  // causal extent of this block
    // S[i, j] = scale * q_i . k_j for j < keys
    MicroGemm(rows, d.hs, q + i0 * d.C3, d.C3, 1, kt, d.Tp, keys, p + i0 * T, T, d.scale, false);
    for (int64_t i = i0; i < i0 + rows; ++i) CausalSoftmaxRow(p + i * T, i, T);
    // O[i, :] = sum_j P[i, j] v_j
    MicroGemm(rows, keys, p + i0 * T, T, 1, vp, d.hs, d.hs, o + i0 * d.C, d.C, 1.0f, false);
  }
}

void BackwardUnit(const Dims& d, int64_t unit, float* dqkv, const float* dout, const float* qkv, const float* att,
                  bool accumulate) {
  const int64_t b = unit / d.H, h = unit % d.H, T = d.T;
  const int64_t base = b * T * d.C3 + h * d.hs;
  const float* q = qkv + base;
  const float* k = q + d.C;
  const float* v = q + 2 * d.C;
  float* dq = dqkv + base;
  float* dk = dq + d.C;
  float* dv = dq + 2 * d.C;
  const float* p = att + unit * T * T;
  const float* dO = dout + b * T * d.C + h * d.hs;
  // dS lives in a per-thread T x T buffer (L2-resident at T = 128) rather than in a
  // B*H*T*T array: it is consumed within the unit, and the round trip through memory was
  // a large part of this memory-bound kernel.
  float* vt = UnitScratch(d.hs * d.Tp + 3 * T * d.hs + T * T);
  float* ds = vt + d.hs * d.Tp + 3 * T * d.hs;
  float* kp = vt + d.hs * d.Tp;
  float* qp = kp + T * d.hs;
  float* dop = qp + T * d.hs;
  PackTransposed(vt, v, d.C3, d);
  PackRows(kp, k, d.C3, d);
  PackRows(qp, q, d.C3, d);
  PackRows(dop, dO, d.C, d);
  for (int64_t i0 = 0; i0 < T; i0 += kRowBlock) {
    const int rows = static_cast<int>(std::min<int64_t>(kRowBlock, T - i0));
    const int64_t keys = i0 + rows;
    // dP[i, j] = dO_i . v_j, then dS in place.
    MicroGemm(rows, d.hs, dO + i0 * d.C, d.C, 1, vt, d.Tp, keys, ds + i0 * T, T, 1.0f, false);
    for (int64_t i = i0; i < i0 + rows; ++i) CausalSoftmaxBackwardRow(ds + i * T, p + i * T, i, T, d.scale);
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
