// Compute precision of the matrix products (GEMM and convolution), per rank thread like
// DeterministicCompute (threads.h).
//
// kBF16 is mixed precision as in PyTorch's autocast: the operands of every GEMM and
// convolution are rounded to bf16 (round to nearest even, core/bf16.h) and the products are
// accumulated in fp32 into an fp32 result. Everything else (activations, layer norm, softmax,
// attention, the loss, gradients, master weights, optimizer state) stays fp32. The rounding is
// an elementwise function of each operand, applied before any sum, so deterministic mode gives
// the same bits for any thread count, world size or layout, exactly as in fp32.
//
// On a processor with AVX512_BF16 (or AMX) oneDNN runs bf16 dot products at twice the fp32
// multiply-add rate. Without them the operands are still rounded to bf16 (same values, so the
// same training), but the products run through the fp32 kernels on the rounded values: correct,
// about as fast as fp32 (a little slower, for the rounding passes).
#pragma once

#include <string>

namespace lockstep::tensor {

enum class Precision { kF32, kBF16 };

void SetComputePrecision(Precision p);
Precision ComputePrecision();

class ScopedPrecision {
 public:
  explicit ScopedPrecision(Precision p) : prev_(ComputePrecision()) { SetComputePrecision(p); }
  ~ScopedPrecision() { SetComputePrecision(prev_); }
  ScopedPrecision(const ScopedPrecision&) = delete;
  ScopedPrecision& operator=(const ScopedPrecision&) = delete;

 private:
  Precision prev_;
};

// What this processor offers bf16 products, from oneDNN's effective ISA.
struct Bf16Support {
  bool native = false;  // oneDNN has bf16 dot-product kernels here (avx512_core_bf16 or amx)
  std::string isa;      // oneDNN's name for the ISA it uses ("avx512_core_bf16", "avx2", ...)
  std::string missing;  // without native support: the instructions that are missing
};
Bf16Support QueryBf16Support();

// One warning line when bf16 is asked for on a processor without bf16 instructions (empty
// when it has them).
std::string Bf16Warning();

// Tests: force the emulated path (operands rounded to bf16, fp32 kernels) even where native
// bf16 kernels exist, so the fallback is exercised on every machine. Process-wide.
void ForceBf16Emulation(bool on);
// Whether bf16 products run on oneDNN's bf16 kernels (native support and not forced off).
bool UseNativeBf16();

}  // namespace lockstep::tensor
