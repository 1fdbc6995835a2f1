// GEMM through oneDNN's row-major dnnl_sgemm.
//
// Determinism: dnnl_sgemm may split K across threads when M*N is small relative to the
// thread count, which changes the summation order and therefore bits. In deterministic
// mode the output is cut into fixed tiles (chosen from M and N only, never from the thread
// count); each tile is one single-threaded dnnl_sgemm over the full K, and tiles are spread
// over the OpenMP team. A tile's bits then depend only on its own data.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>

#include "lockstep/tensor/bf16_ops.h"
#include "lockstep/tensor/check.h"
#include "lockstep/tensor/kernels.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::tensor {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

void CheckLd(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  LS_CHECK(M >= 0 && N >= 0 && K >= 0) << "Gemm M=" << M << " N=" << N << " K=" << K;
  LS_CHECK(lda >= std::max<int64_t>(1, trans_a ? M : K)) << "Gemm lda=" << lda;
  LS_CHECK(ldb >= std::max<int64_t>(1, trans_b ? K : N)) << "Gemm ldb=" << ldb;
  LS_CHECK(ldc >= std::max<int64_t>(1, N)) << "Gemm ldc=" << ldc;
}

void RawSgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  LS_CHECK(st == dnnl_success) << "dnnl_sgemm failed with status " << static_cast<int>(st) << " (M=" << M << " N=" << N
                               << " K=" << K << ")";
}

// Tile of the deterministic decomposition: rows [m0, m0+mt), cols [n0, n0+nt).
void GemmTile(bool trans_a, bool trans_b, int64_t m0, int64_t mt, int64_t n0, int64_t nt, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const float* a = trans_a ? A + m0 : A + m0 * lda;
  const float* b = trans_b ? B + n0 * ldb : B + n0;
  RawSgemm(trans_a, trans_b, mt, nt, K, alpha, a, lda, b, ldb, beta, C + m0 * ldc + n0, ldc);
}

struct Tiling {
  int64_t tm, tn, mtiles, ntiles;
};

// At most 8 tiles of about 256 rows (or, for short M, strips of >= 256 columns): enough for
// a few threads, and big enough that dnnl_sgemm stays efficient and re-packing the shared
// operand per tile is cheap. Depends on M and N only.
Tiling ChooseTiling(int64_t M, int64_t N) {
  Tiling t;
  t.mtiles = std::clamp<int64_t>(CeilDiv(M, 256), 1, 8);
  t.ntiles = std::clamp<int64_t>(8 / t.mtiles, 1, std::max<int64_t>(1, CeilDiv(N, 256)));
  t.tm = std::min(M, RoundUp(CeilDiv(M, t.mtiles), 8));
  t.tn = std::min(N, RoundUp(CeilDiv(N, t.ntiles), 8));
  t.mtiles = CeilDiv(M, t.tm);
  t.ntiles = CeilDiv(N, t.tn);
  return t;
}

// Runs the tiles of one GEMM on the calling thread, each single-threaded.
void DeterministicGemmSerial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                             int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  Tiling t = ChooseTiling(M, N);
  for (int64_t i = 0; i < t.mtiles * t.ntiles; ++i) {
    int64_t m0 = (i / t.ntiles) * t.tm, n0 = (i % t.ntiles) * t.tn;
    GemmTile(trans_a, trans_b, m0, std::min(t.tm, M - m0), n0, std::min(t.tn, N - n0), K, alpha, A, lda, B, ldb, beta,
             C, ldc);
  }
}

}  // namespace

void Gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  CheckLd(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  if (ComputePrecision() == Precision::kBF16) {  // mixed precision (precision.h)
    internal::GemmRoundedBf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (!DeterministicCompute()) {
    RawSgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  Tiling t = ChooseTiling(M, N);
  int64_t ntiles = t.mtiles * t.ntiles;
  if (omp_in_parallel() || omp_get_max_threads() == 1 || ntiles == 1) {
    int prev = omp_get_max_threads();
    omp_set_num_threads(1);
    DeterministicGemmSerial(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    omp_set_num_threads(prev);
    return;
  }
#pragma omp parallel
  {
    omp_set_num_threads(1);  // this implicit task's ICV only: dnnl_sgemm runs single-threaded
#pragma omp for schedule(static)
    for (int64_t i = 0; i < ntiles; ++i) {
      int64_t m0 = (i / t.ntiles) * t.tm, n0 = (i % t.ntiles) * t.tn;
      GemmTile(trans_a, trans_b, m0, std::min(t.tm, M - m0), n0, std::min(t.tn, N - n0), K, alpha, A, lda, B, ldb, beta,
               C, ldc);
    }
  }
}

void BatchedGemm(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                 const float* A, int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b,
                 float beta, float* C, int64_t ldc, int64_t stride_c) {
  CheckLd(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  LS_CHECK(batch >= 0) << "BatchedGemm batch=" << batch;
  if (batch == 0 || M == 0 || N == 0) return;
  int nthr = omp_get_max_threads();
  bool det = DeterministicCompute();
  // Many small matrices: one single-threaded GEMM per matrix, matrices spread over threads
  // (deterministic as well: each matrix is computed whole by one thread).
  // (bf16 precision goes matrix by matrix through Gemm below.)
  if (!omp_in_parallel() && nthr > 1 && batch >= nthr && ComputePrecision() == Precision::kF32) {
#pragma omp parallel
    {
      omp_set_num_threads(1);
#pragma omp for schedule(static)
      for (int64_t i = 0; i < batch; ++i) {
        if (det) {
          DeterministicGemmSerial(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                                  C + i * stride_c, ldc);
        } else {
          RawSgemm(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                   C + i * stride_c, ldc);
        }
      }
    }
    return;
  }
  for (int64_t i = 0; i < batch; ++i) {
    Gemm(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta, C + i * stride_c, ldc);
  }
}

}  // namespace lockstep::tensor
