// bf16 pieces of the tensor layer used by mixed precision (precision.h): the GEMM on bf16
// operands, rounding of fp32 matrices, and the per-step bf16 copy of the weights.
#pragma once

#include <cstdint>

#include "lockstep/tensor/tensor.h"

namespace lockstep::tensor {

// C[M,N] = alpha*op(A)*op(B) + beta*C as Gemm (kernels.h), with A and B already in bf16
// (uint16_t bits) and fp32 accumulation into fp32 C, through oneDNN's bf16 matmul. Needs
// UseNativeBf16(). Deterministic mode: fixed tiles over M and N, each single-threaded over the
// full K (as the fp32 Gemm), so the bits do not depend on the thread count.
void GemmBf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t lda,
              const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Rounds rows x cols fp32 values (row stride ld_in) to bf16 (row stride ld_out); elementwise,
// so the result does not depend on the thread count.
void RoundToBf16(const float* in, int64_t ld_in, uint16_t* out, int64_t ld_out, int64_t rows, int64_t cols);
// The same, keeping fp32: every value becomes the fp32 value of its bf16 rounding.
void RoundThroughBf16(const float* in, int64_t ld_in, float* out, int64_t ld_out, int64_t rows, int64_t cols);

// The bf16 copy of a model's weights, made once per step at a fixed point (after the update,
// before the forward pass): Refresh() rounds the whole flat fp32 parameter buffer. While a
// copy is installed on a thread (ScopedBf16Weights), a bf16 GEMM whose operand lies inside the
// copied fp32 range reads the copy instead of rounding the operand again; other operands
// (activations, gradients, parameters gathered elsewhere) are rounded per call. The copy is
// counted under MemoryTag::kParameterCopy (2 bytes a parameter).
class Bf16WeightCopy {
 public:
  // Rounds src[0, n) into the copy (allocated on first use or when n changes).
  void Refresh(const float* src, int64_t n);
  // The same copy of src[0, n), for a caller that writes the rounding itself (the optimizer
  // does as it updates the weights): returns the n bf16 slots, which must all be written
  // before the next Find.
  uint16_t* RefreshInPlace(const float* src, int64_t n);
  // The copy of `p` when p[0, extent) lies inside the copied range, else nullptr.
  const uint16_t* Find(const float* p, int64_t extent) const;
  int64_t bytes() const { return copy_.defined() ? static_cast<int64_t>(copy_.nbytes()) : 0; }
  void Release();

 private:
  const float* src_ = nullptr;
  int64_t n_ = 0;
  Tensor copy_;  // kBF16, MemoryTag::kParameterCopy
};

// Installs `copy` (nullable) as the calling thread's weight copy for the scope.
class ScopedBf16Weights {
 public:
  explicit ScopedBf16Weights(const Bf16WeightCopy* copy);
  ~ScopedBf16Weights();
  ScopedBf16Weights(const ScopedBf16Weights&) = delete;
  ScopedBf16Weights& operator=(const ScopedBf16Weights&) = delete;

 private:
  const Bf16WeightCopy* prev_;
};
const Bf16WeightCopy* CurrentBf16Weights();

namespace internal {
// Gemm's path in bf16 precision: operands rounded (or found in the weight copy), then
// GemmBf16, or without native bf16 kernels the fp32 Gemm over the rounded values.
void GemmRoundedBf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                     int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// LinearBackward's two products (dinp = beta dinp + dout.W, dW += dout^T.inp) in bf16
// precision with native kernels, dout rounded once for both; the bits of the two Gemm calls.
// False (nothing done) where that path does not apply: fp32, emulated bf16, or a gradient not
// wanted.
bool LinearBackwardBf16(float* dinp, float dinp_beta, float* dweight, const float* dout, const float* inp,
                        const float* weight, int64_t n, int64_t ic, int64_t oc);
}  // namespace internal

}  // namespace lockstep::tensor
